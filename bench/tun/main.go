// Command tun is the TUN benchmark harness (bench/tun/run.sh). As
// "serve" it runs the servers in the servers' namespace: a TCP sink, a TCP
// accept-and-close server and a UDP echo. As "measure" it runs in the
// client's namespace, whose default route goes into the proxy's TUN, and
// measures through it: TCP upload throughput over -streams streams,
// connections per second, UDP echo packets per second with one datagram in
// flight per socket and with -window in flight, the proxy's CPU (from
// /proc) per datagram of the pipelined run and per GB of the TCP run. It
// prints one line of figures; -only measures one of them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tun serve -addr IP | tun measure -addr IP -pid PID")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "", "the servers' address")
	pid := fs.Int("pid", 0, "the proxy's pid (CPU time)")
	dur := fs.Duration("d", 5*time.Second, "measured time of each figure")
	streams := fs.Int("streams", 8, "bulk TCP streams")
	workers := fs.Int("workers", 32, "connection-rate workers")
	udpers := fs.Int("udp", 8, "UDP echo sockets, each one datagram in flight")
	window := fs.Int("window", 32, "datagrams in flight per socket of the pipelined UDP echo")
	only := fs.String("only", "", "measure only this figure: tcp, rate, udp or window (a profile of one path)")
	fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(*addr)
	case "measure":
		err = measure(*addr, *pid, *dur, *streams, *workers, *udpers, *window, *only)
	default:
		err = errors.New("unknown mode " + os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tun:", err)
		os.Exit(1)
	}
}

const (
	sinkPort  = 5201
	closePort = 5202
	echoPort  = 5203

	echoers = 4 // goroutines reading the UDP echo socket
)

func serve(addr string) error {
	sink, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(sinkPort)))
	if err != nil {
		return err
	}
	closer, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(closePort)))
	if err != nil {
		return err
	}
	echo, err := net.ListenPacket("udp", net.JoinHostPort(addr, strconv.Itoa(echoPort)))
	if err != nil {
		return err
	}
	go accept(sink, func(c net.Conn) { io.Copy(io.Discard, c); c.Close() })
	go accept(closer, func(c net.Conn) { c.Write([]byte{1}); c.Close() })
	// Several readers, each echoing a batch of what is queued per system
	// call, so that the echo server is neither one goroutine every datagram
	// waits for nor two system calls a datagram.
	for range echoers {
		go echoBatches(ipv4.NewPacketConn(echo))
	}
	fmt.Println("serving")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

func accept(ln net.Listener, fn func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go fn(c)
	}
}

// cpu is the proxy's user+system CPU time.
func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / 100 // USER_HZ
}

func measure(addr string, pid int, d time.Duration, streams, workers, udpers, window int, only string) error {
	var mbps, cpuPerGB, cps, pps, wpps, usPerPkt float64
	var err error
	if only == "" || only == "tcp" {
		if mbps, cpuPerGB, err = bulk(addr, pid, d, streams); err != nil {
			return fmt.Errorf("bulk: %w", err)
		}
	}
	if only == "" || only == "rate" {
		if cps, err = rate(addr, d, workers); err != nil {
			return fmt.Errorf("rate: %w", err)
		}
	}
	if only == "" || only == "udp" {
		if pps, err = udpEcho(addr, d, udpers); err != nil {
			return fmt.Errorf("udp: %w", err)
		}
	}
	if only == "" || only == "window" {
		c0 := cpu(pid)
		if wpps, err = udpWindow(addr, d, udpers, window); err != nil {
			return fmt.Errorf("udp window: %w", err)
		}
		// Each reply is two datagrams through the proxy.
		usPerPkt = (cpu(pid) - c0).Seconds() * 1e6 / (2 * wpps * d.Seconds())
	}
	fmt.Printf("tcp_mbps=%.0f conns_per_s=%.0f udp_pps=%.0f udp_window_pps=%.0f cpu_us_per_packet=%.2f cpu_s_per_gb=%.2f\n", mbps, cps, pps, wpps, usPerPkt, cpuPerGB)
	return nil
}

// bulk writes over streams connections for d and returns megabits per
// second and the proxy's CPU seconds per GB.
func bulk(addr string, pid int, d time.Duration, streams int) (float64, float64, error) {
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	buf := make([]byte, 128<<10)
	c0 := cpu(pid)
	start := time.Now()
	for range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(sinkPort)), 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetWriteDeadline(start.Add(d))
			for {
				n, err := c.Write(buf)
				total.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	used := (cpu(pid) - c0).Seconds()
	select {
	case err := <-errs:
		return 0, 0, err
	default:
	}
	gb := float64(total.Load()) / 1e9
	return float64(total.Load()) * 8 / el / 1e6, used / gb, nil
}

// rate opens and closes connections from workers goroutines for d,
// each waiting for the server's byte, and returns connections per second.
func rate(addr string, d time.Duration, workers int) (float64, error) {
	var n atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 1)
			for time.Now().Before(end) {
				c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(closePort)), 5*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c, b); err == nil {
					n.Add(1)
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	if n.Load() == 0 {
		return 0, fmt.Errorf("no connection completed (%d failed)", failed.Load())
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// echoBatches echoes every datagram c reads, a batch per system call
// each way, until c closes.
func echoBatches(c *ipv4.PacketConn) {
	ms := batch()
	for {
		n, err := c.ReadBatch(ms, 0)
		if err != nil {
			return
		}
		for i := range ms[:n] {
			ms[i].Buffers[0] = ms[i].Buffers[0][:ms[i].N]
		}
		writeAll(c, ms[:n])
		for i := range ms[:n] {
			ms[i].Buffers[0] = ms[i].Buffers[0][:cap(ms[i].Buffers[0])]
		}
	}
}

// writeAll writes every message of ms, as many batches as it takes.
func writeAll(c *ipv4.PacketConn, ms []ipv4.Message) {
	for len(ms) > 0 {
		n, err := c.WriteBatch(ms, 0)
		if err != nil {
			return
		}
		ms = ms[n:]
	}
}

// batchLen is how many datagrams one system call of the harness reads or
// writes at most.
const batchLen = 64

func batch() []ipv4.Message {
	ms := make([]ipv4.Message, batchLen)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	return ms
}

// The UDP clients keep their own cost low, so that the figures are the
// proxy's and not the harness's: each socket is connected (no address to
// convert each way), its read deadline (a lost datagram's bound) is moved
// every 50 ms rather than for every datagram, and the pipelined one sends
// and reads batches.
const (
	lossWait  = 200 * time.Millisecond // no reply for this long: the datagrams in flight are lost
	lossCheck = 50 * time.Millisecond  // how often the deadline moves
)

// udpEcho runs socks sockets, each with one 64-byte datagram in flight to
// the echo server, for d and returns replies per second.
func udpEcho(addr string, d time.Duration, socks int) (float64, error) {
	to, err := net.ResolveUDPAddr("udp", net.JoinHostPort(addr, strconv.Itoa(echoPort)))
	if err != nil {
		return 0, err
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	start := time.Now()
	for range socks {
		c, err := net.DialUDP("udp", nil, to)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 64)
			buf := make([]byte, 2048)
			var moved time.Time
			for now := time.Now(); now.Before(end); now = time.Now() {
				if now.Sub(moved) > lossCheck {
					c.SetReadDeadline(now.Add(lossWait))
					moved = now
				}
				c.Write(p)
				if _, err := c.Read(buf); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n.Load() == 0 {
		return 0, errors.New("no datagram came back")
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// udpWindow runs socks sockets, each keeping window 64-byte datagrams in
// flight to the echo server, for d and returns replies per second: the
// packets per second the path carries when it is kept busy, where udpEcho
// is bound by one round trip per datagram. Each batch of replies read is
// answered by as many datagrams in one batch. A socket whose replies stop
// counts its datagrams in flight as lost and sends a new window.
func udpWindow(addr string, d time.Duration, socks, window int) (float64, error) {
	to, err := net.ResolveUDPAddr("udp", net.JoinHostPort(addr, strconv.Itoa(echoPort)))
	if err != nil {
		return 0, err
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	start := time.Now()
	for range socks {
		uc, err := net.DialUDP("udp", nil, to)
		if err != nil {
			return 0, err
		}
		defer uc.Close()
		c := ipv4.NewPacketConn(uc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, out := batch(), batch()
			for i := range out {
				out[i].Buffers[0] = out[i].Buffers[0][:64]
			}
			send := func(k int) {
				for k > 0 {
					m := min(k, len(out))
					writeAll(c, out[:m])
					k -= m
				}
			}
			send(window)
			var moved time.Time
			for now := time.Now(); now.Before(end); now = time.Now() {
				if now.Sub(moved) > lossCheck {
					uc.SetReadDeadline(now.Add(lossWait))
					moved = now
				}
				k, err := c.ReadBatch(in, 0)
				if err != nil {
					send(window)
					continue
				}
				n.Add(int64(k))
				send(k)
			}
		}()
	}
	wg.Wait()
	if n.Load() == 0 {
		return 0, errors.New("no datagram came back")
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
