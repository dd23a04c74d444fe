package netx

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func closedPort(t *testing.T, network string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return ap
}

func TestConnectAnyListsEveryAddress(t *testing.T) {
	a := closedPort(t, "tcp4")
	b := closedPort(t, "tcp4")
	d := NewDialer(SocketPolicy{}, time.Second)
	_, err := d.ConnectAny(context.Background(), []netip.AddrPort{a, b})
	if err == nil {
		t.Fatal("dial to closed ports succeeded")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "failed to connect to any address (") || !strings.Contains(msg, a.String()+": ") || !strings.Contains(msg, "; "+b.String()+": ") {
		t.Fatalf("error text = %q", msg)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("errors.Is(ECONNREFUSED) = false for %v", err)
	}
}

func TestConnectAnyTakesTheFirstThatAnswers(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dead := closedPort(t, "tcp4")
	d := NewDialer(SocketPolicy{}, time.Second)
	c, err := d.ConnectAny(context.Background(), []netip.AddrPort{dead, ln.Addr().(*net.TCPAddr).AddrPort()})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestHookSeesAndMayRefuseSockets(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var seen []SocketInfo
	refuse := errors.New("the platform refused")
	allow := true
	p := SocketPolicy{Hook: func(s SocketInfo) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
		if !allow {
			return refuse
		}
		return nil
	}}
	d := NewDialer(p, time.Second)
	target := ln.Addr().(*net.TCPAddr).AddrPort()
	c, err := d.Connect(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	if len(seen) != 1 || seen[0].Network != "tcp4" || seen[0].FD == 0 {
		t.Fatalf("hook saw %+v", seen)
	}
	allow = false
	mu.Unlock()
	_, err = d.ConnectAny(context.Background(), []netip.AddrPort{target})
	if !errors.Is(err, refuse) {
		t.Fatalf("refusing hook: err = %v", err)
	}
	u, err := d.BindDual(context.Background(), []Family{V4, V6}, nil)
	if !errors.Is(err, ErrNoLocalSocket) {
		t.Fatalf("refused UDP binds: %v %v", u, err)
	}
}

func TestPolicyMarkIsSetBeforeTheHook(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mark int
	var gerr error
	p := SocketPolicy{Mark: 0x2a, Hook: func(s SocketInfo) error {
		mark, gerr = syscall.GetsockoptInt(int(s.FD), syscall.SOL_SOCKET, syscall.SO_MARK)
		return nil
	}}
	c, err := NewDialer(p, time.Second).Connect(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Skipf("SO_MARK needs CAP_NET_ADMIN: %v", err)
	}
	c.Close()
	if gerr != nil || mark != 0x2a {
		t.Fatalf("mark = %#x, %v", mark, gerr)
	}
}

func TestKeepAliveIdleFromPolicy(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := SocketPolicy{TCPKeepAliveIdle: 77 * time.Second}
	c, err := NewDialer(p, time.Second).Connect(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, _ := c.SyscallConn()
	var on, idle int
	rc.Control(func(fd uintptr) {
		on, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
	})
	if on != 1 || idle != 77 {
		t.Fatalf("keepalive = %d, idle = %d", on, idle)
	}
	c2, err := NewDialer(SocketPolicy{}, time.Second).Connect(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rc, _ = c2.SyscallConn()
	rc.Control(func(fd uintptr) { on, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) })
	if on != 0 {
		t.Fatal("keepalive enabled without a policy idle time (OS default is off)")
	}
}

func TestBindAddressPerFamily(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := NewSocketPolicy(0, "", []netip.Addr{netip.MustParseAddr("127.0.0.3")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewDialer(p, time.Second).Connect(context.Background(), ln.Addr().(*net.TCPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr(); got != netip.MustParseAddr("127.0.0.3") {
		t.Fatalf("local address %v", got)
	}
	if _, err := NewSocketPolicy(0, "", []netip.Addr{netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")}, 0); err == nil {
		t.Fatal("two IPv4 bind addresses accepted")
	}
}

func TestBindDualV6OnlyAndFamilies(t *testing.T) {
	d := NewDialer(SocketPolicy{}, 0)
	u, err := d.BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if u.Socket(V4) == nil {
		t.Fatal("no v4 socket")
	}
	if s6 := u.Socket(V6); s6 != nil {
		rc, _ := s6.SyscallConn()
		var v6only int
		rc.Control(func(fd uintptr) {
			v6only, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY)
		})
		if v6only != 1 {
			t.Fatal("IPv6 UDP socket is not v6-only")
		}
	}
	if _, err := d.BindDual(context.Background(), nil, nil); !errors.Is(err, ErrNoFamily) || err.Error() != "udp: no address family requested" {
		t.Fatalf("no family: %v", err)
	}
	v4only, err := d.BindDual(context.Background(), []Family{V4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v4only.Close()
	err = v4only.WriteTo([]byte("x"), netip.MustParseAddrPort("[::1]:53"))
	if err == nil || err.Error() != "udp: no local socket in the family of [::1]:53" {
		t.Fatalf("v6 send on a v4-only link: %v", err)
	}
}

func TestDualUDPRoundTrip(t *testing.T) {
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			echo.WriteToUDPAddrPort(b[:n], from)
		}
	}()
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	to := echo.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := u.WriteTo([]byte("ping"), to); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, from, err := u.ReadFrom(b)
	if err != nil || string(b[:n]) != "ping" || from != to {
		t.Fatalf("read %q from %v: %v", b[:n], from, err)
	}
}
