package hysteria2_test

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"switchyard/outbound/hysteria2/internal/hy2test"
	"switchyard/outbound/internal/proxytest"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/supervisor"
	"switchyard/test/socksclient"
)

const secondPassword = "hy2-second-secret"

// reuseSpec is a supervisor spec with a SOCKS inbound whose flows go, by
// default, to a Hysteria 2 outbound "hy2" aimed at srv with password.
func reuseSpec(srv *hy2test.Server, password string) *spec.Spec {
	return &spec.Spec{
		Dial:   spec.Dial{ConnectTimeout: 5 * time.Second, MaxConcurrentDials: 64},
		Reload: spec.Reload{Drain: spec.DrainKeep},
		Inbounds: []spec.Inbound{{
			Tag: "socks-in", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:0"),
		}},
		Outbounds: []spec.Outbound{
			{Tag: "direct", Type: "direct", AddressFamily: "auto"},
			{
				Tag:      "hy2",
				Type:     "hysteria2",
				UDP:      true,
				Server:   srv.Addr.String(),
				Password: password,
				TLS:      &spec.TLS{ServerName: hy2test.Host, ALPN: []string{"h3"}, CAFile: srv.Cert.CAFile},
			},
		},
		Route: spec.Route{Final: "hy2"},
	}
}

func echoServer(t *testing.T) string {
	t.Helper()
	return proxytest.Listen(t, func(c net.Conn) { io.Copy(c, c) })
}

func socksDial(t *testing.T, proxy, target string) net.Conn {
	t.Helper()
	c, err := socksclient.Dial(proxy, target, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func portOf(t *testing.T, addr string) uint16 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}

// requireConns requires the server to have seen exactly want: per
// authenticated connection, its user, TCP requests and whether it ended.
func requireConns(t *testing.T, srv *hy2test.Server, want ...hy2test.Conn) {
	t.Helper()
	got := srv.Conns()
	if len(got) != len(want) {
		t.Fatalf("the server saw %d connections %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.User != w.User || g.Streams != w.Streams || g.Closed != w.Closed {
			t.Fatalf("connection %d: user %q, %d streams, closed %v; want user %q, %d streams, closed %v",
				i+1, g.User, g.Streams, g.Closed, w.User, w.Streams, w.Closed)
		}
	}
}

// waitUntil polls cond until it holds or five seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hy2Target(t *testing.T, sv *supervisor.Supervisor) *plane.Target {
	t.Helper()
	tg, ok := sv.Plane().Targets["hy2"]
	if !ok {
		t.Fatal("no hy2 target in the plane")
	}
	return tg
}

// An apply that leaves a Hysteria 2 outbound's spec alone keeps the very
// outbound, so a flow opened after it rides the QUIC connection the flows
// before it opened: one server session for both. An apply that changes the
// outbound builds a version with a connection of its own, and the old
// version's connection lives as long as its last flow, not longer.
func TestAReusedOutboundKeepsItsConnectionAcrossApplies(t *testing.T) {
	srv := hy2test.Start(t, hy2test.Options{Users: map[string]string{
		hy2test.Password: "first",
		secondPassword:   "second",
	}})
	echo := echoServer(t)

	sv, err := supervisor.New(reuseSpec(srv, hy2test.Password), supervisor.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	proxy := sv.Addr("socks-in").String()

	// 1. The first flow brings the connection up.
	v1 := hy2Target(t, sv)
	if v1.ID() != (plane.OutboundID{Tag: "hy2", Version: 1}) {
		t.Fatalf("first apply: target %s", v1.ID())
	}
	f1 := socksDial(t, proxy, echo)
	proxytest.Echoes(t, f1, []byte("first flow"))
	requireConns(t, srv, hy2test.Conn{User: "first", Streams: 1})

	// 2. A rule and an outbound are added; hy2 is unchanged, so it is
	// reused, and a second flow shares the first one's connection.
	direct := echoServer(t)
	s2 := reuseSpec(srv, hy2test.Password)
	s2.Outbounds = append(s2.Outbounds, spec.Outbound{Tag: "block", Type: "block"})
	s2.Rules = []spec.Rule{{Port: []uint16{portOf(t, direct)}, Outbound: "direct"}}
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if sv.Plane().Epoch != 2 {
		t.Fatalf("second apply: epoch %d, want 2", sv.Plane().Epoch)
	}
	if hy2Target(t, sv) != v1 {
		t.Fatalf("an unchanged outbound was not reused: %s", hy2Target(t, sv).ID())
	}
	f2 := socksDial(t, proxy, echo)
	proxytest.Echoes(t, f2, []byte("second flow"))
	proxytest.Echoes(t, f1, []byte("first flow after the apply"))
	d := socksDial(t, proxy, direct)
	proxytest.Echoes(t, d, []byte("the new rule routes direct"))
	d.Close()
	requireConns(t, srv, hy2test.Conn{User: "first", Streams: 2})
	if n := srv.Sessions.Load(); n != 1 {
		t.Fatalf("%d authenticated sessions for two flows on a reused outbound, want 1", n)
	}
	if n := v1.Flows(); n != 2 {
		t.Fatalf("hy2@v1 has %d flows, want 2", n)
	}

	// 3. The password changes: hy2@v2 is built and authenticates on a
	// connection of its own; hy2@v1 is retired but keeps its connection
	// while its flows run.
	if err := sv.Apply(reuseSpec(srv, secondPassword)); err != nil {
		t.Fatal(err)
	}
	v2 := hy2Target(t, sv)
	if v2.ID() != (plane.OutboundID{Tag: "hy2", Version: 2}) {
		t.Fatalf("a changed outbound: target %s, want hy2@v2", v2.ID())
	}
	f3 := socksDial(t, proxy, echo)
	proxytest.Echoes(t, f3, []byte("third flow"))
	proxytest.Echoes(t, f1, []byte("first flow on the retired version"))
	proxytest.Echoes(t, f2, []byte("second flow on the retired version"))
	requireConns(t, srv,
		hy2test.Conn{User: "first", Streams: 2},
		hy2test.Conn{User: "second", Streams: 1})

	// Its first flow ends: the other still runs on the old connection.
	f1.Close()
	waitUntil(t, "hy2@v1 has one flow left", func() bool { return v1.Flows() == 1 })
	proxytest.Echoes(t, f2, []byte("the last flow on the retired version"))
	requireConns(t, srv,
		hy2test.Conn{User: "first", Streams: 2},
		hy2test.Conn{User: "second", Streams: 1})

	// Its last flow ends: the old connection closes; the new one stays.
	f2.Close()
	waitUntil(t, "the server sees hy2@v1's connection end", func() bool {
		c := srv.Conns()
		return len(c) > 0 && c[0].Closed
	})
	if n := v1.Flows(); n != 0 {
		t.Fatalf("hy2@v1 has %d flows after its last one ended", n)
	}
	proxytest.Echoes(t, f3, []byte("the new version after the old one closed"))
	f4 := socksDial(t, proxy, echo)
	proxytest.Echoes(t, f4, []byte("another flow on hy2@v2"))
	requireConns(t, srv,
		hy2test.Conn{User: "first", Streams: 2, Closed: true},
		hy2test.Conn{User: "second", Streams: 2})
	if n := srv.Sessions.Load(); n != 2 {
		t.Fatalf("%d authenticated sessions, want 2", n)
	}
}
