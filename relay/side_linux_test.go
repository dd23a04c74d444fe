package relay

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// loopback returns the two ends of one loopback TCP connection.
func loopback(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// resetPeer resets the connection of c from its far end, and waits until
// c's socket has taken the reset in.
func resetPeer(t *testing.T, c, peer *net.TCPConn) {
	t.Helper()
	peer.SetLinger(0)
	peer.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if closed, ok := tcpClosed(c); ok && closed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the reset did not arrive")
		}
		time.Sleep(time.Millisecond)
	}
}

// A failed splice is put on the socket whose connection is over, whatever
// the error says.
func TestASpliceFailureIsPutOnTheSocketThatFailed(t *testing.T) {
	src, _ := loopback(t)
	dst, dstPeer := loopback(t)
	if spliceFailedAtDst(src, dst, syscall.ECONNRESET) {
		t.Fatal("with both sockets up, a reset was put on dst")
	}
	if !spliceFailedAtDst(src, dst, syscall.EPIPE) {
		t.Fatal("with both sockets up, a broken pipe was put on src")
	}
	resetPeer(t, dst, dstPeer)
	if !spliceFailedAtDst(src, dst, syscall.ECONNRESET) {
		t.Fatal("dst was reset, and the failure was put on src")
	}

	src, srcPeer := loopback(t)
	dst, _ = loopback(t)
	resetPeer(t, src, srcPeer)
	if spliceFailedAtDst(src, dst, syscall.EPIPE) {
		t.Fatal("src was reset, and the failure was put on dst")
	}
	dst.Close()
	if spliceFailedAtDst(src, dst, syscall.ECONNRESET) {
		t.Fatal("src was reset and dst cannot tell: the failure was put on dst")
	}
}
