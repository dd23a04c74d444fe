package socks

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

// WaitPacket blocks until a datagram arrives and returns the size of the
// whole datagram, header included: a bound of the payload ReadPacket then
// returns, read whole into a buffer of that size.
func TestAssociateWaitPacket(t *testing.T) {
	_, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	c := proxytest.WaitPacket(l)
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", w.N, w.Err)
	case <-time.After(50 * time.Millisecond):
	}
	peer := netx.DomainAddr("peer.example", 53)
	payload := make([]byte, 3000)
	if err := l.WritePacket(payload, peer); err != nil {
		t.Fatal(err)
	}
	var w proxytest.Waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a datagram")
	}
	want := len("echo:") + len(payload)
	if w.Err != nil || w.N != want+3+1+1+len("peer.example")+2 {
		t.Fatalf("WaitPacket: %d, %v; want the datagram's size", w.N, w.Err)
	}
	buf := make([]byte, w.N)
	n, from, err := l.ReadPacket(buf)
	if err != nil || n != want || from != peer || string(buf[:5]) != "echo:" {
		t.Fatalf("ReadPacket: %d from %v, %v", n, from, err)
	}
}

// WaitPacket fails as ReadPacket would: after Close, and once the control
// connection ended, with its read error, which it leaves to ReadPacket.
func TestAssociateWaitPacketErrors(t *testing.T) {
	_, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	c := proxytest.WaitPacket(l)
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case w := <-c:
		if !errors.Is(w.Err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after Close: %v", w.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked WaitPacket")
	}
	if _, err := l.WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}

	r, addr := startRelay(t, "udp4", "", "", nil)
	l = dialPacket(t, newOutbound(t, addr, "", "", nil))
	control := <-r.control
	c = proxytest.WaitPacket(l)
	time.Sleep(50 * time.Millisecond)
	control.(*net.TCPConn).SetLinger(0)
	control.Close() // a reset
	select {
	case w := <-c:
		if !errors.Is(w.Err, syscall.ECONNRESET) {
			t.Fatalf("blocked WaitPacket at the control connection's reset: %v", w.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the control connection's end did not end a blocked WaitPacket")
	}
	if _, _, err := l.ReadPacket(make([]byte, 100)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("ReadPacket after WaitPacket failed: %v, want the reset", err)
	}
	if _, err := l.WaitPacket(); !errors.Is(err, ErrControlClosed) {
		t.Fatalf("WaitPacket after the reset was returned: %v", err)
	}
}

// logBuffer is a log's text, written and read from any goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Datagrams from anyone but the relay are dropped while WaitPacket waits,
// each with a debug line: they do not wake it, so the reader takes no
// buffer for them. The relay's reply does.
func TestAssociateWaitPacketDropsStrangers(t *testing.T) {
	_, addr := startRelay(t, "udp4", "", "", nil)
	var logs logBuffer
	deps := proxytest.Deps(nil)
	deps.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o, err := New(spec.Outbound{Tag: "up", Type: "socks", Server: addr, UDP: true}, deps)
	if err != nil {
		t.Fatal(err)
	}
	l := dialPacket(t, o)
	local := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), l.udp.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	peer := netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.9:9"))
	c := proxytest.WaitPacket(l)
	for range 3 {
		stranger.WriteToUDPAddrPort(socks5.AppendUDP(nil, peer, []byte("spoofed")), local)
	}
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v for a stranger's datagrams", w.N, w.Err)
	case <-time.After(100 * time.Millisecond):
	}
	line := fmt.Sprintf("socks udp: dropping a datagram from %s, which is not the relay", stranger.LocalAddr())
	if n := strings.Count(logs.String(), line); n != 3 {
		t.Fatalf("%d lines %q for 3 datagrams:\n%s", n, line, logs.String())
	}
	if err := l.WritePacket([]byte("hi"), peer); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-c:
		if w.Err != nil || w.N != len(socks5.AppendUDP(nil, peer, []byte("echo:hi"))) {
			t.Fatalf("WaitPacket: %d, %v; want the relay's reply", w.N, w.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay's reply did not end WaitPacket")
	}
	if got, from := readPacket(t, l, 100); got != "echo:hi" || from != peer {
		t.Fatalf("read %q from %v", got, from)
	}
}
