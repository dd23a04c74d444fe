package tun_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
)

// lab is two namespaces: the client's, where switchyard runs with its TUN
// and where the applications run, and the servers', reached over a veth
// pair. The servers' addresses (10.215.x.2, 10.215.x.3) are routed in the
// client's namespace only for sockets with switchyard's mark: an
// application reaches them through the TUN or not at all, so a server
// that sees a connection saw one switchyard made.
type lab struct {
	client, server string // namespace names
	web, peer2     string // the servers' addresses
	hostC, hostS   string // the veth ends
}

const swMark = "0x2023" // the mark auto_route sets when [socket] has none

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

var labN struct {
	sync.Mutex
	n int
}

func newLab(t *testing.T) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the tun tests need root: they create network namespaces and TUN devices")
	}
	labN.Lock()
	labN.n++
	n := labN.n
	labN.Unlock()
	var id [3]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	sub := fmt.Sprintf("%d", 100+n+os.Getpid()%100)
	l := &lab{
		client: "sy-tunc-" + tag, server: "sy-tuns-" + tag,
		web: "10.215." + sub + ".2", peer2: "10.215." + sub + ".3",
		hostC: "10.214." + sub + ".1", hostS: "10.214." + sub + ".2",
	}
	t.Cleanup(func() {
		run("ip", "netns", "del", l.client)
		run("ip", "netns", "del", l.server)
	})
	for _, c := range [][]string{
		{"ip", "netns", "add", l.client},
		{"ip", "netns", "add", l.server},
		{"ip", "-n", l.client, "link", "set", "lo", "up"},
		{"ip", "-n", l.server, "link", "set", "lo", "up"},
		{"ip", "-n", l.client, "link", "add", "vc", "type", "veth", "peer", "name", "vs", "netns", l.server},
		{"ip", "-n", l.client, "addr", "add", l.hostC + "/30", "dev", "vc"},
		{"ip", "-n", l.server, "addr", "add", l.hostS + "/30", "dev", "vs"},
		{"ip", "-n", l.client, "link", "set", "vc", "up"},
		{"ip", "-n", l.server, "link", "set", "vs", "up"},
		{"ip", "-n", l.server, "addr", "add", l.web + "/32", "dev", "lo"},
		{"ip", "-n", l.server, "addr", "add", l.peer2 + "/32", "dev", "lo"},
		// Only switchyard's own (marked) sockets have a route to the servers.
		{"ip", "-n", l.client, "rule", "add", "fwmark", swMark, "lookup", "100", "pref", "100"},
		{"ip", "-n", l.client, "route", "add", "10.215." + sub + ".0/24", "via", l.hostS, "table", "100"},
	} {
		if err := run(c...); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// in runs fn with the calling goroutine in namespace ns: the sockets fn
// opens belong to ns for their whole life.
func in(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// The thread stays locked: it ends with the goroutine, never reused.
		return errors.Join(ferr, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// webServer serves, on addr in the servers' namespace, the address each
// request was accepted on.
func (l *lab) webServer(t *testing.T, addr string) {
	t.Helper()
	var ln net.Listener
	if err := in(l.server, func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s", r.Context().Value(http.LocalAddrContextKey))
	})}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
}

// tcpEcho serves, on addr in the servers' namespace, an echo of every
// connection.
func (l *lab) tcpEcho(t *testing.T, addr string) {
	t.Helper()
	var ln net.Listener
	if err := in(l.server, func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					c.Write(buf[:n])
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

// udpEcho answers every datagram on addr in the servers' namespace with
// "<addr> <payload>".
func (l *lab) udpEcho(t *testing.T, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := in(l.server, func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(addr+" "+string(buf[:n])), from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
}

// dnsServer answers A queries for name with ip on addr in the servers'
// namespace and counts the queries it saw.
func (l *lab) dnsServer(t *testing.T, addr, name, ip string) *atomic.Int64 {
	t.Helper()
	var pc net.PacketConn
	if err := in(l.server, func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	seen := new(atomic.Int64)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		seen.Add(1)
		r := new(dns.Msg)
		r.SetReply(q)
		if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA && q.Question[0].Name == dns.Fqdn(name) {
			rr, _ := dns.NewRR(dns.Fqdn(name) + " 60 IN A " + ip)
			r.Answer = append(r.Answer, rr)
		}
		w.WriteMsg(r)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan struct{})
	go func() { defer close(done); srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { srv.Shutdown(); <-done })
	return seen
}
