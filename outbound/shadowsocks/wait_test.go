package shadowsocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
)

func dialPacketLink(t *testing.T, server, method, password string) *packetLink {
	t.Helper()
	o := build(t, server, method, password)
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*packetLink)
}

// WaitPacket blocks until a datagram arrives and returns its size: the
// sealed packet's, a bound of the payload ReadPacket then opens in place in
// a buffer of that size.
func TestPacketLinkWaitPacket(t *testing.T) {
	srv := udpEchoServer(t, "aes-128-gcm", "pw")
	l := dialPacketLink(t, srv.LocalAddr().String(), "aes-128-gcm", "pw")
	c := proxytest.WaitPacket(l)
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", w.N, w.Err)
	case <-time.After(50 * time.Millisecond):
	}
	to := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 53}
	payload := bytes.Repeat([]byte("p"), 5000)
	if err := l.WritePacket(payload, to); err != nil {
		t.Fatal(err)
	}
	var w proxytest.Waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a datagram")
	}
	want := len("re:") + len(payload)
	if sealed := 16 + 7 + want + 16; w.Err != nil || w.N != sealed { // salt, IPv4 address, tag
		t.Fatalf("WaitPacket: %d, %v; want the sealed size %d", w.N, w.Err, sealed)
	}
	buf := make([]byte, w.N)
	n, from, err := l.ReadPacket(buf)
	if err != nil || n != want || from != to || string(buf[:3]) != "re:" {
		t.Fatalf("ReadPacket: %d from %v, %v", n, from, err)
	}

	// Without a wait, or with a buffer shorter than the datagram, the
	// datagram still opens, and its payload is truncated to the buffer.
	if err := l.WritePacket(payload, to); err != nil {
		t.Fatal(err)
	}
	if w = <-proxytest.WaitPacket(l); w.Err != nil {
		t.Fatal(w.Err)
	}
	short := make([]byte, 100)
	if n, from, err := l.ReadPacket(short); err != nil || n != 100 || from != to || string(short[:3]) != "re:" {
		t.Fatalf("ReadPacket with a short buffer: %d from %v, %v", n, from, err)
	}
	if err := l.WritePacket([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	if n, _, err := l.ReadPacket(short); err != nil || string(short[:n]) != "re:x" {
		t.Fatalf("ReadPacket without a wait: %q, %v", short[:n], err)
	}
}

// A stranger's datagrams are dropped while WaitPacket waits, each with a
// debug line: they do not wake it, so the reader takes no buffer for them.
// The server's reply does, and ReadPacket returns it.
func TestPacketLinkWaitPacketDropsStrangers(t *testing.T) {
	srv := udpEchoServer(t, "aes-128-gcm", "pw")
	l := dialPacketLink(t, srv.LocalAddr().String(), "aes-128-gcm", "pw")
	var logs logBuffer
	l.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	local := l.sock.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), local.Port())
	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	c := proxytest.WaitPacket(l)
	for range 3 {
		stranger.WriteToUDPAddrPort(make([]byte, 100), local)
	}
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v for a stranger's datagrams", w.N, w.Err)
	case <-time.After(100 * time.Millisecond):
	}
	line := fmt.Sprintf("shadowsocks udp: dropping a datagram from %s, which is not the server", stranger.LocalAddr())
	if n := strings.Count(logs.String(), line); n != 3 {
		t.Fatalf("%d lines %q for 3 datagrams:\n%s", n, line, logs.String())
	}
	to := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 7}
	if err := l.WritePacket([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	var w proxytest.Waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's reply did not end WaitPacket")
	}
	if w.Err != nil || w.N <= len("re:x") {
		t.Fatalf("WaitPacket: %d, %v; want the sealed reply's size", w.N, w.Err)
	}
	p := make([]byte, w.N)
	n, from, err := l.ReadPacket(p)
	if err != nil || from != to || string(p[:n]) != "re:x" {
		t.Fatalf("after the stranger's datagrams: %q from %v, %v", p[:n], from, err)
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

// Close ends a blocked WaitPacket with net.ErrClosed, and every later one.
func TestPacketLinkWaitPacketClose(t *testing.T) {
	l := dialPacketLink(t, "127.0.0.1:9", "aes-128-gcm", "pw")
	c := proxytest.WaitPacket(l)
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case w := <-c:
		if !errors.Is(w.Err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after Close: %v", w.Err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end WaitPacket")
	}
	if _, err := l.WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadPacket after Close: %v", err)
	}
}

// Sealing into a pooled buffer allocates nothing (a 2022 method: SIP004
// derives a subkey per packet, its only allocation).
func TestPacketLinkWriteAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	l := dialPacketLink(t, "127.0.0.1:9", "2022-blake3-aes-128-gcm", "AAAAAAAAAAAAAAAAAAAAAA==")
	to := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 53}
	small, large := make([]byte, 1200), make([]byte, 60000)
	write := func() {
		if err := l.WritePacket(small, to); err != nil {
			t.Fatal(err)
		}
		if err := l.WritePacket(large, to); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if n := testing.AllocsPerRun(50, write); n != 0 {
		t.Fatalf("%.1f allocations per pair of writes", n)
	}
}
