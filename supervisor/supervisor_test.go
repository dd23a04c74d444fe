package supervisor

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"switchyard/config"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func baseSpec() *spec.Spec {
	return &spec.Spec{
		Dial:   spec.Dial{ConnectTimeout: 2 * time.Second, MaxConcurrentDials: 64},
		Reload: spec.Reload{Drain: spec.DrainKeep},
		Inbounds: []spec.Inbound{{
			Tag: "socks-in", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:0"), UDP: true,
		}},
		Outbounds: []spec.Outbound{
			{Tag: "direct", Type: "direct", AddressFamily: "auto", UDP: true},
			{Tag: "direct2", Type: "direct", AddressFamily: "auto", UDP: true},
			{Tag: "block", Type: "block", UDP: true},
		},
		Route: spec.Route{Final: "direct"},
	}
}

func run(t *testing.T, s *spec.Spec, opts Options) (*Supervisor, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sv, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	return sv, sv.Addr("socks-in").String()
}

func tcpEcho(t *testing.T) string {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func udpEcho(t *testing.T) *net.UDPConn {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(b[:n], from)
		}
	}()
	return c
}

type hookLog struct {
	mu      sync.Mutex
	sockets []string
	refuse  error
}

func (h *hookLog) hook(s netx.SocketInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sockets = append(h.sockets, s.Network)
	return h.refuse
}

func (h *hookLog) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.sockets {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func TestDirectFlowsAreDialedOnHookedSockets(t *testing.T) {
	h := &hookLog{}
	_, proxy := run(t, baseSpec(), Options{SocketHook: h.hook})
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("ping"))
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := h.count("tcp"); n != 1 {
		t.Fatalf("direct TCP dial: %d hooked stream sockets, want 1", n)
	}
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	peer := udpEcho(t)
	a.Send(peer.LocalAddr().String(), []byte("x"))
	if _, _, ok := a.Recv(2 * time.Second); !ok {
		t.Fatal("no UDP reply")
	}
	if n := h.count("udp"); n < 1 {
		t.Fatal("direct UDP flow used no hooked datagram socket")
	}
}

func TestARefusingHookFailsTheDial(t *testing.T) {
	h := &hookLog{refuse: errors.New("the platform refused")}
	_, proxy := run(t, baseSpec(), Options{SocketHook: h.hook})
	_, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	var re socksclient.ReplyError
	if !errors.As(err, &re) || re.Code == 0 {
		t.Fatalf("dial under a refusing hook: %v, want a SOCKS5 failure reply", err)
	}
}

func TestAnAssociationCountsEachSubLink(t *testing.T) {
	one, two := udpEcho(t), udpEcho(t)
	s := baseSpec()
	s.Rules = []spec.Rule{{Port: []uint16{uint16(two.LocalAddr().(*net.UDPAddr).Port)}, Outbound: "direct2"}}
	sv, proxy := run(t, s, Options{})
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, p := range []struct {
		to   *net.UDPConn
		size int
	}{{one, 10}, {one, 20}, {two, 30}} {
		a.Send(p.to.LocalAddr().String(), make([]byte, p.size))
		if _, got, ok := a.Recv(2 * time.Second); !ok || len(got) != p.size {
			t.Fatalf("reply of %d bytes: %d %v", p.size, len(got), ok)
		}
	}
	var udp []string
	for _, f := range sv.Tracker().Flows() {
		if f.Network == netx.UDP {
			udp = append(udp, f.Outbound)
			want := int64(30)
			if f.Up != want || f.Down != want {
				t.Errorf("%s: up %d down %d, want %d each", f.Outbound, f.Up, f.Down, want)
			}
			if f.Inbound != "socks-in" {
				t.Errorf("flow inbound %q", f.Inbound)
			}
		}
	}
	slices.Sort(udp)
	if !slices.Equal(udp, []string{"direct2@v1", "direct@v1"}) {
		t.Fatalf("UDP flows %v, want one per outbound", udp)
	}
}

func TestCheckBuildsWithoutSockets(t *testing.T) {
	s := baseSpec()
	s.Inbounds[0].Listen = netip.MustParseAddrPort("192.0.2.1:1") // not local: binding would fail
	if err := Check(s); err != nil {
		t.Fatal(err)
	}
	s.Outbounds[0].AddressFamily = "sideways"
	if err := Check(s); err == nil || !strings.Contains(err.Error(), "building outbound direct@v1 failed") {
		t.Fatalf("bad outbound: %v", err)
	}
}

// A dns outbound is checked against the configuration's [dns] table, as a
// start builds it: a valid configuration with one passes Check.
func TestCheckDNSOutbound(t *testing.T) {
	s, _, err := config.Parse([]byte(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "dns-out"
type = "dns"

[[rules]]
port = [53]
outbound = "dns-out"

[dns]
servers = ["udp://127.0.0.1:9"]
`), "check.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s); err != nil {
		t.Fatalf("Check of a dns outbound with [dns]: %v", err)
	}
}
