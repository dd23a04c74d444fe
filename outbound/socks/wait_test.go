package socks

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
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
