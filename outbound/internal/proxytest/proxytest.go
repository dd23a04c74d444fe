// Package proxytest holds what the proxy clients' tests share: loopback
// servers that stop with the test, a socket hook that records and refuses,
// and checks on the streams and datagram links under test.
package proxytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

// Serve runs handle on every connection ln accepts until the test ends, and
// returns ln's address. Cleanup closes ln and every connection and waits for
// the handlers.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) string {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
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
				defer c.Close()
				handle(c)
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
	return ln.Addr().String()
}

// Listen is Serve on a new loopback TCP listener.
func Listen(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln, handle)
}

// Dial returns a loopback TCP connection to a server that runs handle on
// it; cleanup closes both ends and waits for handle.
func Dial(t testing.TB, handle func(net.Conn)) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp4", Listen(t, handle))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// EchoConn returns a loopback TCP connection whose peer writes greeting (a
// server's response header, say) and then writes back every byte it reads,
// allocating nothing once started.
func EchoConn(t testing.TB, greeting []byte) net.Conn {
	t.Helper()
	return Dial(t, func(c net.Conn) {
		c.Write(greeting)
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	})
}

// Ctx is a context that ends after five seconds or with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TCPFlow is a TCP flow from loopback to dst ("host:port"); dst must parse.
func TCPFlow(dst string) netx.Flow {
	a, err := netx.ParseAddr(dst)
	if err != nil {
		panic(err)
	}
	return netx.Flow{Network: netx.TCP, Dst: a, Src: netip.MustParseAddrPort("127.0.0.1:5555")}
}

// Echoes writes msg on c and requires it back within five seconds; it
// leaves c with no deadline.
func Echoes(t testing.TB, c net.Conn, msg []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
}

// Deps are an outbound's dependencies in a test: sockets under h's policy
// (any policy hook when h is nil), with a one-second connect timeout, and
// servers resolved by the system.
func Deps(h *Hook) outbound.Deps {
	var p netx.SocketPolicy
	if h != nil {
		p.Hook = h.hook
	}
	return outbound.Deps{Dialer: netx.NewDialer(p, time.Second), Servers: netx.SystemResolver{}}
}

// ErrRefusedByHook is the error of a socket a Hook refuses.
var ErrRefusedByHook = errors.New("refused by the socket hook")

// Hook records the network of every socket the policy sees and refuses the
// networks in Refuse.
type Hook struct {
	Refuse map[string]bool // set before use

	mu   sync.Mutex
	seen []string
}

func (h *Hook) hook(s netx.SocketInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, s.Network)
	if h.Refuse[s.Network] {
		return ErrRefusedByHook
	}
	return nil
}

// Networks is the network of every socket seen, in order.
func (h *Hook) Networks() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// PacketsAllocateNothing requires that, once l has carried a packet to each
// peer and back, sending one and reading the answer allocate nothing, for a
// small packet (one that fits an MTU) and a large one (8,000 bytes, which
// takes a pooled buffer each way). l's
// server answers each packet with the same payload; attributed is the peer
// a reply to peer comes from. A link that waits for its packets
// (netx.PacketWaiter) is waited on before each read, and the size it
// waits for must hold the payload. It skips under the race detector, whose
// pools drop buffers at random (scripts/test.sh runs it again without).
func PacketsAllocateNothing(t *testing.T, l netx.PacketLink, peers []netx.Addr, attributed func(peer netx.Addr) netx.Addr) {
	t.Helper()
	if RaceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	payloads := [][]byte{make([]byte, 1200), make([]byte, 8000)}
	buf := make([]byte, 65536)
	roundTrip := func() {
		for _, payload := range payloads {
			for _, peer := range peers {
				if err := l.WritePacket(payload, peer); err != nil {
					t.Fatal(err)
				}
				if w, ok := l.(netx.PacketWaiter); ok {
					if size, err := w.WaitPacket(); err != nil || size < len(payload) {
						t.Fatalf("WaitPacket: %d, %v; want at least %d", size, err, len(payload))
					}
				}
				if n, from, err := l.ReadPacket(buf); err != nil || n != len(payload) || from != attributed(peer) {
					t.Fatalf("%d bytes from %v: %v", n, from, err)
				}
			}
		}
	}
	roundTrip()
	if allocs := testing.AllocsPerRun(200, roundTrip); allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}
