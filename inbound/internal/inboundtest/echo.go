package inboundtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// TCPEcho listens on addr ("127.0.0.1:0", "[::1]:0") and echoes every
// connection until the test ends. ok is false when addr cannot be bound.
func TCPEcho(t testing.TB, addr string) (ln net.Listener, ok bool) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, false
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln, true
}

// UDPEcho listens on 127.0.0.1 and sends every datagram back to its sender
// until the test ends.
func UDPEcho(t testing.TB) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			pc.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return pc
}
