package direct

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/outbound"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type resolver map[string][]netip.Addr

func (r resolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return append([]netip.Addr(nil), a...), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// lines collects log output.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *lines) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func newDirect(s netx.Strategy, hook func(netx.SocketInfo) error, logs io.Writer) *Outbound {
	if logs == nil {
		logs = io.Discard
	}
	return New(s, outbound.Deps{
		Dialer:       netx.NewDialer(netx.SocketPolicy{Hook: hook}, time.Second),
		Destinations: resolver{"echo.test": {netip.MustParseAddr("127.0.0.1")}},
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
}

func udpEcho(t *testing.T) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(b[:n], from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestStreamByNameOnHookedSocket(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	var hooked []string
	var mu sync.Mutex
	o := newDirect(netx.Auto, func(s netx.SocketInfo) error { mu.Lock(); hooked = append(hooked, s.Network); mu.Unlock(); return nil }, nil)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("echo.test", port)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "hi" {
		t.Fatalf("read %q", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 1 || hooked[0] != "tcp4" {
		t.Fatalf("hooked sockets %v", hooked)
	}
}

func TestStreamErrors(t *testing.T) {
	o := newDirect(netx.IPv6Only, nil, nil)
	_, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("echo.test", 1)})
	if err == nil || err.Error() != "dial: no usable ipv6_only destination address for echo.test:1" {
		t.Fatalf("v4-only name under ipv6_only: %v", err)
	}
	refuse := errors.New("refused by the platform")
	o = newDirect(netx.Auto, func(netx.SocketInfo) error { return refuse }, nil)
	_, err = o.DialStream(context.Background(), netx.Flow{Dst: netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 9}})
	if !errors.Is(err, refuse) || !strings.HasPrefix(err.Error(), "failed to connect to any address (127.0.0.1:9: ") {
		t.Fatalf("refusing hook: %v", err)
	}
}

func TestPacketsToIPsAndNames(t *testing.T) {
	echo := udpEcho(t)
	logs := &lines{}
	var udpSockets int
	var mu sync.Mutex
	o := newDirect(netx.Auto, func(s netx.SocketInfo) error {
		mu.Lock()
		if strings.HasPrefix(s.Network, "udp") {
			udpSockets++
		}
		mu.Unlock()
		return nil
	}, logs)
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	defer l.Close()
	mu.Lock()
	if udpSockets < 1 {
		t.Fatal("no hooked UDP socket")
	}
	mu.Unlock()
	if err := l.WritePacket([]byte("by-ip"), netx.AddrFromAddrPort(echo)); err != nil {
		t.Fatal(err)
	}
	if err := l.WritePacket([]byte("lost"), netx.DomainAddr("nowhere.test", 53)); err != nil {
		t.Fatalf("unresolvable destination must be dropped silently: %v", err)
	}
	if err := l.WritePacket([]byte("by-name"), netx.DomainAddr("echo.test", echo.Port())); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	for _, want := range []string{"by-ip", "by-name"} {
		n, from, err := l.ReadPacket(b)
		if err != nil || string(b[:n]) != want || from != netx.AddrFromAddrPort(echo) {
			t.Fatalf("got %q from %v (%v), want %q", b[:n], from, err, want)
		}
	}
	// The name is looked up off the send path: the drop is logged once its
	// lookup failed.
	for deadline := time.Now().Add(3 * time.Second); !strings.Contains(logs.String(), "freedom: dropping a datagram to an unresolvable nowhere.test:53"); {
		if time.Now().After(deadline) {
			t.Fatalf("missing debug line; logs:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPacketFamilyRules(t *testing.T) {
	o := newDirect(netx.IPv4Only, nil, nil)
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.WritePacket([]byte("x"), netx.Addr{IP: netip.MustParseAddr("::1"), Port: 53})
	if err == nil || err.Error() != "udp: no local socket in the family of [::1]:53" {
		t.Fatalf("v6 packet on ipv4_only: %v", err)
	}
	refusing := newDirect(netx.Auto, func(netx.SocketInfo) error { return errors.New("no") }, nil)
	if _, err := refusing.DialPacket(context.Background(), netx.Flow{Network: netx.UDP}); err == nil || err.Error() != "udp: no usable local socket in any requested family" {
		t.Fatalf("every family refused: %v", err)
	}
}
