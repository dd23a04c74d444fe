package balancer_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
)

// upstream is a loopback TCP listener that accepts every connection and
// counts those its peer closed at once.
type upstream struct {
	ln           net.Listener
	wg           sync.WaitGroup
	closedByPeer atomic.Int32
}

// listen starts an upstream on addr ("127.0.0.1:0" for any port).
func listen(t *testing.T, addr string) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	u.wg.Go(u.serve)
	t.Cleanup(u.close)
	return u
}

func (u *upstream) serve() {
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.wg.Go(func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				u.closedByPeer.Add(1)
			}
		})
	}
}

func (u *upstream) close() {
	u.ln.Close()
	u.wg.Wait()
}

func (u *upstream) addr() netx.Addr {
	return netx.AddrFromAddrPort(u.ln.Addr().(*net.TCPAddr).AddrPort())
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) netx.Addr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
	ln.Close()
	return a
}

// staticResolver answers from a fixed table and records what it was asked.
type staticResolver struct {
	mu    sync.Mutex
	ips   map[string][]netip.Addr
	asked []string
}

func (r *staticResolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	return r.ips[host], nil
}

func (r *staticResolver) questions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// hungResolver never answers: each lookup reports that it started, blocks
// until its context is done and reports the context's error.
type hungResolver struct {
	entered chan string
	ended   chan error
}

func newHungResolver() *hungResolver {
	return &hungResolver{entered: make(chan string, 16), ended: make(chan error, 16)}
}

func (r *hungResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	r.entered <- host
	<-ctx.Done()
	r.ended <- ctx.Err()
	return nil, ctx.Err()
}

// hooked records the sockets a policy hook sees and refuses them with
// refuse when it is set.
type hooked struct {
	mu     sync.Mutex
	seen   []netx.SocketInfo
	refuse error
}

func (h *hooked) hook(s netx.SocketInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, s)
	return h.refuse
}

func (h *hooked) sockets() []netx.SocketInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]netx.SocketInfo(nil), h.seen...)
}

func plainDialer() *netx.Dialer { return netx.NewDialer(netx.SocketPolicy{}, time.Second) }

// within fails t unless cond holds before d passes.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
