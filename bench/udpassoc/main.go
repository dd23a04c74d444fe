// Command udpassoc measures the memory of idle SOCKS5 UDP associations in
// two proxies side by side: for each target it opens -n associations, each
// sending one datagram of -size bytes to a local UDP echo server and reading
// its reply, then reads the proxy's RSS with all of them idle, closes them
// and reads it again after -settle. It prints the figures of both targets
// and the ratio first/second.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

type target struct {
	name  string
	proxy string
	pid   int
}

type targets []target

func (t *targets) String() string { return fmt.Sprint(*t) }
func (t *targets) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	addr, pidText, ok2 := strings.Cut(rest, ",")
	pid, err := strconv.Atoi(pidText)
	if !ok || !ok2 || err != nil {
		return errors.New("want name=host:port,pid")
	}
	*t = append(*t, target{name, addr, pid})
	return nil
}

type result struct {
	before, held, after int // RSS in bytes
}

func main() {
	var ts targets
	flag.Var(&ts, "target", "name=host:port,pid of a proxy's SOCKS5 inbound and process (twice: subject, baseline)")
	n := flag.Int("n", 1000, "associations per target")
	size := flag.Int("size", 1200, "bytes of the one datagram each association sends")
	settle := flag.Duration("settle", 10*time.Second, "wait after closing the associations before the last reading")
	flag.Parse()
	if len(ts) == 0 {
		fmt.Fprintln(os.Stderr, "udpassoc: no -target")
		os.Exit(2)
	}
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fail(err)
	}
	defer echo.Close()
	go func() {
		b := make([]byte, 65535)
		for {
			m, from, err := echo.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			echo.WriteToUDPAddrPort(b[:m], from)
		}
	}()
	dst := echo.LocalAddr().(*net.UDPAddr).AddrPort()
	var rs []result
	for _, t := range ts {
		r, err := measure(t, dst, *n, *size, *settle)
		if err != nil {
			fail(fmt.Errorf("%s: %w", t.name, err))
		}
		rs = append(rs, r)
	}
	fmt.Printf("idle SOCKS5 UDP associations: %d per target, one %d-byte datagram each\n\n", *n, *size)
	fmt.Printf("%-34s", "")
	for _, t := range ts {
		fmt.Printf(" %14s", t.name)
	}
	if len(ts) == 2 {
		fmt.Printf(" %8s", "ratio")
	}
	fmt.Println()
	row := func(label string, f func(r result) float64) {
		fmt.Printf("%-34s", label)
		for _, r := range rs {
			fmt.Printf(" %14.1f", f(r))
		}
		if len(rs) == 2 && f(rs[1]) != 0 {
			fmt.Printf(" %8.2f", f(rs[0])/f(rs[1]))
		}
		fmt.Println()
	}
	row("RSS before, MiB", func(r result) float64 { return mib(r.before) })
	row("RSS with the associations, MiB", func(r result) float64 { return mib(r.held) })
	row("KiB per idle association", func(r result) float64 { return float64(r.held-r.before) / float64(*n) / 1024 })
	row(fmt.Sprintf("RSS %v after they closed, MiB", *settle), func(r result) float64 { return mib(r.after) })
}

func mib(b int) float64 { return float64(b) / (1 << 20) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "udpassoc:", err)
	os.Exit(1)
}

func measure(t target, dst netip.AddrPort, n, size int, settle time.Duration) (result, error) {
	var r result
	// One association first, so what every proxy sets up once is not
	// counted per association.
	warm, err := open(t.proxy, dst, size)
	if err != nil {
		return r, err
	}
	warm.close()
	time.Sleep(500 * time.Millisecond)
	if r.before, err = rss(t.pid); err != nil {
		return r, err
	}
	as := make([]*assoc, 0, n)
	defer func() {
		for _, a := range as {
			a.close()
		}
	}()
	for i := range n {
		a, err := open(t.proxy, dst, size)
		if err != nil {
			return r, fmt.Errorf("association %d: %w", i, err)
		}
		as = append(as, a)
	}
	time.Sleep(time.Second)
	if r.held, err = rss(t.pid); err != nil {
		return r, err
	}
	for _, a := range as {
		a.close()
	}
	as = nil
	time.Sleep(settle)
	r.after, err = rss(t.pid)
	return r, err
}

func rss(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.Fields(rest)[0])
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// assoc is one association: its control connection and the client's
// socket.
type assoc struct {
	ctrl net.Conn
	pc   *net.UDPConn
}

func (a *assoc) close() {
	a.ctrl.Close()
	a.pc.Close()
}

// open makes one UDP ASSOCIATE (no authentication, address and port zero),
// sends one datagram to dst through it and waits for the reply.
func open(proxy string, dst netip.AddrPort, size int) (*assoc, error) {
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		c.Close()
		return nil, err
	}
	var head [12]byte // method choice, then a reply with an IPv4 address
	if _, err := io.ReadFull(c, head[:]); err != nil {
		c.Close()
		return nil, err
	}
	if head[1] != 0 || head[3] != 0 || head[5] != 1 {
		c.Close()
		return nil, fmt.Errorf("refused: %x", head)
	}
	relay := netip.AddrPortFrom(netip.AddrFrom4([4]byte(head[6:10])), binary.BigEndian.Uint16(head[10:12]))
	if relay.Addr().IsUnspecified() {
		ap, _ := netip.ParseAddrPort(proxy)
		relay = netip.AddrPortFrom(ap.Addr(), relay.Port())
	}
	c.SetDeadline(time.Time{})
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		c.Close()
		return nil, err
	}
	a := &assoc{ctrl: c, pc: pc}
	ip := dst.Addr().As4()
	pkt := append([]byte{0, 0, 0, 1}, ip[:]...)
	pkt = binary.BigEndian.AppendUint16(pkt, dst.Port())
	pkt = append(pkt, make([]byte, size)...)
	if _, err := pc.WriteToUDPAddrPort(pkt, relay); err != nil {
		a.close()
		return nil, err
	}
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := pc.Read(make([]byte, 65535)); err != nil {
		a.close()
		return nil, fmt.Errorf("no reply: %w", err)
	}
	return a, nil
}
