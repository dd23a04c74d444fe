package tun

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// 2,000 TCP connections and 10,000 UDP datagrams from 100 endpoints
// through the inbound: afterwards its goroutines go back to their level
// and every association ends at its idle timeout.
func TestSoakReturnsToItsLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	conn := &fakeConnector{target: echoServer(t)}
	l := newLab(t, Config{UDPIdle: 500 * time.Millisecond}, conn)
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()

	var wg sync.WaitGroup
	errs := make(chan error, 2000)
	sem := make(chan struct{}, 50)
	for i := range 2000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), 80)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := l.app.DialTCP(ctx, dst)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			msg := []byte(fmt.Sprint(i))
			c.Write(msg)
			if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
				errs <- err
			}
		}()
	}
	for e := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, err := l.app.ListenUDP(uint16(42000 + e))
			if err != nil {
				errs <- err
				return
			}
			defer u.Close()
			to := &net.UDPAddr{IP: net.IPv4(198, 51, 100, byte(e)), Port: 9}
			buf := make([]byte, 64)
			for range 100 {
				u.WriteTo([]byte("x"), to)
				u.SetReadDeadline(time.Now().Add(time.Second))
				u.ReadFrom(buf)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n < 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of 2,100 clients failed", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		g, a := runtime.NumGoroutine(), l.in.Associations()
		if g <= base+5 && a == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the soak: %d goroutines (%d before), %d associations", g, base, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
