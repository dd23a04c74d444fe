package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

type resolver map[string][]netip.Addr

func (r resolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return append([]netip.Addr(nil), a...), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// accept runs a loopback TCP listener whose accepted connections are handed
// to handle; cleanup closes everything and waits.
func accept(t *testing.T, handle func(c net.Conn)) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

func echo(c net.Conn) { io.Copy(c, c) }

func deps(hook func(netx.SocketInfo) error) Options {
	return Options{
		Dialer:   netx.NewDialer(netx.SocketPolicy{Hook: hook}, time.Second),
		Resolver: resolver{"proxy.test": {netip.MustParseAddr("127.0.0.1")}, "v6only.test": {netip.MustParseAddr("::1")}},
	}
}

func dial(t *testing.T, o spec.Outbound, d Options) (net.Conn, error) {
	t.Helper()
	td, err := New(o, d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return td.Dial(ctx)
}

// A server named by host is resolved with the server resolver and reached
// under the socket policy.
func TestDialResolvesTheServerUnderThePolicy(t *testing.T) {
	ap := accept(t, echo)
	var mu sync.Mutex
	var seen []string
	hook := func(s netx.SocketInfo) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s.Network+" "+s.Address)
		return nil
	}
	c, err := dial(t, spec.Outbound{Server: "proxy.test:" + itoa(ap.Port())}, deps(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*net.TCPConn); !ok {
		t.Fatalf("plain transport gave a %T", c)
	}
	if want := []string{"tcp4 " + ap.String()}; !slices.Equal(seen, want) {
		t.Fatalf("hooked %v, want %v", seen, want)
	}
	d, _ := New(spec.Outbound{Server: "proxy.test:" + itoa(ap.Port())}, deps(nil))
	if d.Server() != netx.DomainAddr("proxy.test", ap.Port()) {
		t.Fatalf("Server() = %v", d.Server())
	}
}

func TestDialFailures(t *testing.T) {
	ap := accept(t, echo)
	refuse := errors.New("the platform refused")
	if _, err := dial(t, spec.Outbound{Server: ap.String()}, deps(func(netx.SocketInfo) error { return refuse })); !errors.Is(err, refuse) {
		t.Fatalf("refusing hook: %v", err)
	}
	if _, err := dial(t, spec.Outbound{Server: "nowhere.test:1"}, deps(nil)); err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Fatalf("unresolvable server: %v", err)
	}
	if _, err := dial(t, spec.Outbound{Server: "v6only.test:1", AddressFamily: "ipv4_only"}, deps(nil)); !errors.Is(err, netx.ErrNoUsableAddress) {
		t.Fatalf("no address of the family: %v", err)
	}
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	if _, err := dial(t, spec.Outbound{Server: closed}, deps(nil)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("closed port: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, o := range []spec.Outbound{
		{Server: "no-port"},
		{Server: "p:1", AddressFamily: "sideways"},
		{Server: "p:1", Transport: spec.Transport{Type: "carrier-pigeon"}},
	} {
		if _, err := New(o, deps(nil)); err == nil {
			t.Errorf("%+v built", o)
		}
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
