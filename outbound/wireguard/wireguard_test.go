package wireguard

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

func TestTCPEchoOneMiBOverBothFamilies(t *testing.T) {
	_, c := pair(t, "", nil)
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	for _, dst := range []string{"echo.test:7", "10.7.0.1:7", "[fd00:7::1]:7", "v6.test:7"} {
		conn := dialTCP(t, c, dst)
		echoOnce(t, conn, payload)
		conn.Close()
	}
}

func TestUDPEachDatagramToItsOwnPeer(t *testing.T) {
	_, c := pair(t, "", nil)
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: mustAddr("10.7.0.1:9001")})
	if err != nil {
		t.Fatal(err)
	}
	if !c.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	r := readLink(t, l)
	peers := []struct {
		to, from, prefix string
	}{
		{"10.7.0.1:9001", "10.7.0.1:9001", "p0:"},
		{"v4.test:9002", "10.7.0.1:9002", "p1:"},
		{"[fd00:7::1]:9001", "[fd00:7::1]:9001", "p0:"},
	}
	for _, size := range []int{1, 2, 100, 512, 1000, 1400, 8000} {
		for _, p := range peers {
			payload := make([]byte, size)
			rand.Read(payload)
			from, got := r.exchange(t, l, mustAddr(p.to), payload)
			if from != mustAddr(p.from) || !bytes.Equal(got, append([]byte(p.prefix), payload...)) {
				t.Fatalf("%d bytes to %s: reply of %d bytes from %s", size, p.to, len(got), from)
			}
		}
	}
}

// The endpoint resolves to both families; endpoint_address_family picks
// the IPv6 one, and the tunnel's socket is an IPv6 socket.
func TestAnIPv6Endpoint(t *testing.T) {
	keys := newKeyPair(t)
	p := startPeer(t, peerOptions{client: keys.public, ipv6: true})
	o := clientSpec(p, keys)
	o.EndpointAddressFamily = "prefer_ipv6"
	c := newClient(t, o)
	c.servers.answers["peer.test"] = []netip.Addr{mustIP("127.0.0.1"), mustIP("::1")}
	conn := dialTCP(t, c, "echo.test:7")
	echoOnce(t, conn, []byte("over an IPv6 endpoint"))
	conn.Close()
	if got := c.socks.networks(); len(got) != 1 || got[0] != "udp6" {
		t.Fatalf("hooked sockets: %v", got)
	}
}

func TestReservedBytesAndPresharedKey(t *testing.T) {
	p, c := pair(t, newPSK(t), []byte{0xa1, 0xb2, 0xc3})
	conn := dialTCP(t, c, "echo.test:7")
	echoOnce(t, conn, []byte("reserved bytes both ways"))
	conn.Close()
	if p.bad.Load() != 0 || p.received.Load() == 0 {
		t.Fatalf("peer accepted %d messages, dropped %d for their reserved bytes", p.received.Load(), p.bad.Load())
	}
}

func TestMismatchedReservedOrKeyNeverConnects(t *testing.T) {
	cases := []struct {
		name     string
		peerRes  []byte
		clientFn func(o *specEdit)
		wantBad  bool
	}{
		{"client without the peer's reserved bytes", []byte{1, 2, 3}, func(*specEdit) {}, true},
		{"client with other reserved bytes", []byte{1, 2, 3}, func(o *specEdit) { o.reserved = []byte{3, 2, 1} }, true},
		{"client with another preshared key", nil, func(o *specEdit) { o.psk = true }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keys := newKeyPair(t)
			p := startPeer(t, peerOptions{client: keys.public, reserved: tc.peerRes})
			var e specEdit
			tc.clientFn(&e)
			o := clientSpec(p, keys)
			o.Reserved = e.reserved
			if e.psk {
				o.PresharedKey = newPSK(t)
			}
			c := newClient(t, o)
			c.connectTimeout = 1500 * time.Millisecond
			_, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")})
			if err == nil || err.Error() != "wireguard: tunnel TCP connect failed for all resolved addresses (10.7.0.1: connect timed out)" {
				t.Fatalf("dial: %v", err)
			}
			if tc.wantBad && p.bad.Load() == 0 {
				t.Fatal("the peer saw no message with wrong reserved bytes")
			}
		})
	}
}

type specEdit struct {
	reserved []byte
	psk      bool
}

func TestConstructionOpensNothingAndChecksTheSpec(t *testing.T) {
	keys := newKeyPair(t)
	c := newClient(t, clientSpec(nil, keys))
	if n := len(c.socks.networks()); n != 0 || c.servers.count() != 0 {
		t.Fatalf("construction opened %d sockets and made %d lookups", n, c.servers.count())
	}
	bad := []struct {
		edit func(o *spec.Outbound)
		want string
	}{
		{func(o *spec.Outbound) { o.PrivateKey = "not base64!" }, "wireguard: private_key is not base64"},
		{func(o *spec.Outbound) { o.PeerPublicKey = "AAAA" }, "wireguard: peer_public_key must be 32 bytes, got 3"},
		{func(o *spec.Outbound) { o.PresharedKey = "AAAA" }, "wireguard: preshared_key must be 32 bytes, got 3"},
		{func(o *spec.Outbound) { o.Reserved = []byte{1, 2} }, "wireguard: reserved must be empty or 3 bytes, got 2"},
		{func(o *spec.Outbound) { o.MTU = 100 }, "wireguard: mtu 100 is out of range (576 to 65535)"},
		{func(o *spec.Outbound) { o.Endpoint = "nohost" }, "wireguard: endpoint: bad address"},
		{func(o *spec.Outbound) { o.AddressFamily = "v4" }, "wireguard: address_family: unknown address family"},
		{func(o *spec.Outbound) { o.EndpointAddressFamily = "v6" }, "wireguard: endpoint_address_family: unknown address family"},
	}
	for _, b := range bad {
		o := clientSpec(nil, keys)
		b.edit(&o)
		if _, err := New(o, c.deps()); err == nil || !strings.HasPrefix(err.Error(), b.want) {
			t.Errorf("want %q, got %v", b.want, err)
		}
	}
}

func TestTheTunnelIsOneHookedSocketForEveryFlow(t *testing.T) {
	_, c := pair(t, "", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")})
			if err == nil {
				conn.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got := c.socks.networks(); len(got) != 1 || got[0] != "udp4" {
		t.Fatalf("hooked sockets: %v", got)
	}
	if c.servers.count() != 1 {
		t.Fatalf("the endpoint was resolved %d times", c.servers.count())
	}
}

func TestARefusingHookFailsTheDial(t *testing.T) {
	keys := newKeyPair(t)
	c := newClient(t, clientSpec(nil, keys))
	c.socks.refuse = errRefused
	_, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")})
	if !errors.Is(err, errRefused) {
		t.Fatalf("dial with a refusing hook: %v", err)
	}
	if got := c.socks.networks(); len(got) != 1 || got[0] != "udp4" {
		t.Fatalf("hooked sockets: %v", got)
	}
	if c.logs.count("wireguard: tunnel start failed: ") != 1 || !strings.Contains(c.logs.String(), errRefused.Error()) {
		t.Fatalf("logs:\n%s", c.logs)
	}
	if _, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP}); !errors.Is(err, ErrTunnelDown) {
		t.Fatalf("dial during the backoff: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	keys := newKeyPair(t)
	o := clientSpec(nil, keys)
	o.Addresses = nil
	c := newClient(t, o)
	_, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")})
	if !errors.Is(err, ErrNoLocalAddress) || err.Error() != "wireguard: no tunnel-local addresses configured" {
		t.Fatalf("no addresses: %v", err)
	}
	if !strings.Contains(c.logs.String(), "wireguard: tunnel start failed: wireguard: no tunnel-local addresses configured") {
		t.Fatalf("logs:\n%s", c.logs)
	}

	for _, family := range []string{"", "ipv6_only"} {
		o = clientSpec(nil, keys)
		o.Endpoint = "gone.test:51820"
		if family != "" {
			o.Endpoint = "peer.test:51820" // resolves to IPv4 only
		}
		o.EndpointAddressFamily = family
		c = newClient(t, o)
		_, err = c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, ErrEndpointNotResolved) || err.Error() != "wireguard: endpoint domain did not resolve" {
			t.Fatalf("endpoint under %q: %v", family, err)
		}
	}
	o = clientSpec(nil, keys)
	c = newClient(t, o)
	lookupFailed := errors.New("lookup failed")
	c.servers.err = lookupFailed
	if _, err = c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")}); !errors.Is(err, lookupFailed) {
		t.Fatalf("resolver error: %v", err)
	}
}

func TestConnectTriesEveryAddressInOrder(t *testing.T) {
	_, c := pair(t, "", nil)
	c.connectTimeout = 2 * time.Second
	c.dests.answers["two.test"] = []netip.Addr{mustIP("10.7.0.1"), mustIP("10.7.0.99")}
	_, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("two.test:1")})
	want := "wireguard: tunnel TCP connect failed for all resolved addresses (10.7.0.1: connection was refused; 10.7.0.99: connect timed out)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	c.dests.answers["two.test"] = []netip.Addr{mustIP("10.7.0.99"), mustIP("10.7.0.1")}
	conn, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("two.test:7")})
	if err != nil {
		t.Fatalf("second address: %v", err)
	}
	conn.Close()
}

func TestDialHonoursItsContext(t *testing.T) {
	_, c := pair(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.DialStream(ctx, netx.Flow{Dst: mustAddr("10.7.0.99:7")})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("dial with a 300 ms context: %v after %v", err, time.Since(start))
	}
}

func TestCloseEndsEveryFlowAndRefusesDials(t *testing.T) {
	_, c := pair(t, "", nil)
	conn := dialTCP(t, c, "10.7.0.1:7")
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	r := readLink(t, l)
	from, got := r.exchange(t, l, mustAddr("10.7.0.1:9001"), []byte("x"))
	if from != mustAddr("10.7.0.1:9001") || string(got) != "p0:x" {
		t.Fatalf("reply %q from %s", got, from)
	}
	c.Close()
	select {
	case got := <-r.replies:
		if !errors.Is(got.err, net.ErrClosed) {
			t.Fatalf("link after Close: %v", got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a pending ReadPacket outlived Close")
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("stream read after Close: %v", err)
	}
	conn.Close()
	if _, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dial after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDatagramLimits(t *testing.T) {
	_, c := pair(t, "", nil)
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.WritePacket(make([]byte, maxPayloadV4+1), mustAddr("10.7.0.1:9001")); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized datagram: %v", err)
	}
	if err := l.WritePacket([]byte("x"), mustAddr("nowhere.test:9001")); err != nil {
		t.Fatalf("unresolvable name: %v", err)
	}
	if !strings.Contains(c.logs.String(), "wireguard: dropping a datagram to nowhere.test:9001: wireguard: destination did not resolve") {
		t.Fatalf("logs:\n%s", c.logs)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestErrorTextsMatchTheirKinds(t *testing.T) {
	if !errors.Is(ErrDestinationNotResolved, netx.ErrNotResolved) {
		t.Fatal("ErrDestinationNotResolved does not match netx.ErrNotResolved")
	}
	e := &noUsableError{strategy: netx.IPv4Only, dst: mustAddr("a.test:1")}
	if !errors.Is(e, netx.ErrNoUsableAddress) || e.Error() != "wireguard: no usable ipv4_only destination address for a.test:1" {
		t.Fatalf("%v", e)
	}
	ce := &connectError{attempts: []attempt{{mustIP("10.0.0.1"), errConnectTimedOut}}}
	if !errors.Is(ce, errConnectTimedOut) {
		t.Fatal("connectError hides its attempts")
	}
	_ = fmt.Sprint(ce)
}

// A tunnel with addresses of one family carries streams and datagrams of
// that family.
func TestSingleFamilyTunnels(t *testing.T) {
	for _, tc := range []struct {
		local  netip.Prefix
		stream string
		udp    string
	}{
		{clientV4, "echo.test:7", "10.7.0.1:9002"},
		{clientV6, "echo.test:7", "[fd00:7::1]:9002"},
	} {
		t.Run(tc.local.String(), func(t *testing.T) {
			keys := newKeyPair(t)
			p := startPeer(t, peerOptions{client: keys.public})
			o := clientSpec(p, keys)
			o.Addresses = []netip.Prefix{tc.local}
			c := newClient(t, o)
			conn := dialTCP(t, c, tc.stream)
			echoOnce(t, conn, []byte("one family"))
			conn.Close()
			l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
			if err != nil {
				t.Fatal(err)
			}
			r := readLink(t, l)
			from, got := r.exchange(t, l, mustAddr(tc.udp), []byte("x"))
			if from != mustAddr(tc.udp) || string(got) != "p1:x" {
				t.Fatalf("reply %q from %s", got, from)
			}
		})
	}
}
