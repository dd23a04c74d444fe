package supervisor

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/store"
)

// modeSpec routes by the rules to direct2; GLOBAL can choose the selector
// "pick" (direct3 first) and direct is the direct mode's outbound.
func modeSpec() *spec.Spec {
	s := selectorSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "direct3", Type: "direct", AddressFamily: "auto", UDP: true})
	s.Groups[0].Members = []string{"direct3", "direct"}
	s.Route.Final = "direct2"
	return s
}

// chainOf dials through the supervisor and returns the leaf and the
// selection chain of the flow, as the flow table shows them.
func chainOf(t *testing.T, sv *Supervisor) (string, []string) {
	t.Helper()
	dst, err := netx.ParseAddr(tcpEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sv.conn.ConnectStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: dst, Inbound: "socks-in"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	flows := sv.Tracker().Flows()
	if len(flows) == 0 {
		t.Fatal("no flow in the table")
	}
	return flows[len(flows)-1].Outbound, flows[len(flows)-1].Chain
}

func TestModesRouteTheNextFlow(t *testing.T) {
	sv, _ := run(t, modeSpec(), Options{})
	if sv.Mode() != plane.ModeRule {
		t.Fatalf("mode at start %v", sv.Mode())
	}
	if got := leafOf(t, sv); got != "direct2@v1" {
		t.Fatalf("rule mode: flow on %s", got)
	}
	if err := sv.SetMode(plane.ModeGlobal); err != nil {
		t.Fatal(err)
	}
	g := sv.Global()
	if g.Now() != "direct2" || !slices.Equal(g.Members(), []string{"pick", "direct", "direct2", "block", "direct3"}) {
		t.Fatalf("GLOBAL now %q, members %v", g.Now(), g.Members())
	}
	if got, chain := chainOf(t, sv); got != "direct2@v1" || !slices.Equal(chain, []string{"GLOBAL", "direct2"}) {
		t.Fatalf("global mode by default (the final): flow on %s, chain %v", got, chain)
	}
	if err := sv.SelectGlobal("pick"); err != nil {
		t.Fatal(err)
	}
	if got, chain := chainOf(t, sv); got != "direct3@v1" || !slices.Equal(chain, []string{"GLOBAL", "pick", "direct3"}) {
		t.Fatalf("global mode on pick: flow on %s, chain %v", got, chain)
	}
	if err := sv.SetMode(plane.ModeDirect); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); got != "direct@v1" {
		t.Fatalf("direct mode: flow on %s", got)
	}
	if err := sv.SelectGlobal("nope"); err == nil {
		t.Fatal("a GLOBAL choice outside its members was taken")
	}
	if err := sv.SetMode(plane.Mode(7)); err == nil {
		t.Fatal("an unknown mode was taken")
	}
}

// The mode and the GLOBAL choice survive a reload; a choice whose member
// is gone falls back to the default; both survive a restart.
func TestModeAndGlobalChoiceSurviveAReloadAndARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := store.Open(path, slog.New(slog.DiscardHandler))
	sv, _ := run(t, modeSpec(), Options{Store: st})
	if err := sv.SetMode(plane.ModeGlobal); err != nil {
		t.Fatal(err)
	}
	if err := sv.SelectGlobal("direct3"); err != nil {
		t.Fatal(err)
	}
	// direct3 rebuilt: the same node at v2, still chosen.
	s2 := modeSpec()
	s2.Outbounds[3].AddressFamily = "ipv4_only"
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); sv.Mode() != plane.ModeGlobal || got != "direct3@v2" {
		t.Fatalf("after a reload: mode %v, flow on %s", sv.Mode(), got)
	}
	// direct3 removed: GLOBAL goes to the final.
	s3 := selectorSpec()
	s3.Route.Final = "direct2"
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); sv.Global().Now() != "direct2" || got != "direct2@v1" {
		t.Fatalf("after the member went: GLOBAL now %q, flow on %s", sv.Global().Now(), got)
	}
	if c, _ := st.GlobalChoice(); c != "" {
		t.Fatalf("the store kept the gone member %q", c)
	}
	if err := sv.SelectGlobal("pick"); err != nil {
		t.Fatal(err)
	}
	sv.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := store.Open(path, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { st2.Close() })
	sv2, _ := run(t, modeSpec(), Options{Store: st2})
	if sv2.Mode() != plane.ModeGlobal || sv2.Global().Now() != "pick" {
		t.Fatalf("after a restart: mode %v, GLOBAL now %q", sv2.Mode(), sv2.Global().Now())
	}
	if got := leafOf(t, sv2); got != "direct3@v1" {
		t.Fatalf("after a restart: flow on %s", got)
	}
}

// The mode follows the last word: the API's over the file it was set
// under, the file's once edited, at start and on a reload.
func TestModeFollowsTheLastWord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	withMode := func(m string) *spec.Spec { s := modeSpec(); s.Route.Mode = m; return s }
	st := store.Open(path, slog.New(slog.DiscardHandler))
	sv, _ := run(t, withMode("global"), Options{Store: st})
	if sv.Mode() != plane.ModeGlobal {
		t.Fatalf("the file's mode at start: %v", sv.Mode())
	}
	if err := sv.SetMode(plane.ModeDirect); err != nil {
		t.Fatal(err)
	}
	// A reload that leaves [route] mode alone keeps the API's mode...
	if err := sv.Apply(withMode("global")); err != nil {
		t.Fatal(err)
	}
	if sv.Mode() != plane.ModeDirect {
		t.Fatalf("a reload without a mode change: %v", sv.Mode())
	}
	sv.Close()
	st.Close()

	// ...and so does a restart on the same file.
	st = store.Open(path, slog.New(slog.DiscardHandler))
	sv, _ = run(t, withMode("global"), Options{Store: st})
	if sv.Mode() != plane.ModeDirect {
		t.Fatalf("a restart on the same file: %v", sv.Mode())
	}
	// A reload that changes the file's mode applies it.
	if err := sv.Apply(withMode("rule")); err != nil {
		t.Fatal(err)
	}
	if sv.Mode() != plane.ModeRule {
		t.Fatalf("a reload that changed the mode: %v", sv.Mode())
	}
	if err := sv.SetMode(plane.ModeGlobal); err != nil {
		t.Fatal(err)
	}
	sv.Close()
	st.Close()

	// A restart on a file whose mode was edited since: the file's.
	st = store.Open(path, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { st.Close() })
	sv, _ = run(t, withMode("direct"), Options{Store: st})
	if sv.Mode() != plane.ModeDirect {
		t.Fatalf("a restart on an edited file: %v", sv.Mode())
	}
}

func TestGlobalIsAReservedTag(t *testing.T) {
	s := baseSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "GLOBAL", Type: "direct", AddressFamily: "auto"})
	if _, err := New(s, Options{}); err == nil {
		t.Fatal("an outbound tagged GLOBAL was built")
	}
}

// A mode change moves the next flow, not the ones open: they keep their
// outbound and keep relaying.
func TestAModeChangeCutsNoFlow(t *testing.T) {
	sv, _ := run(t, modeSpec(), Options{})
	dst, err := netx.ParseAddr(tcpEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sv.conn.ConnectStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: dst, Inbound: "socks-in"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := sv.SetMode(plane.ModeDirect); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); got != "direct@v1" {
		t.Fatalf("the next flow: %s", got)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the open flow after the change: %q %v", buf, err)
	}
	if flows := sv.Tracker().Flows(); len(flows) != 1 || flows[0].Outbound != "direct2@v1" {
		t.Fatalf("the open flow moved: %+v", flows)
	}
}

// A rule to a block outbound holds in global and direct mode too.
func TestBlockRulesHoldInEveryMode(t *testing.T) {
	dst, err := netx.ParseAddr(tcpEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	s := modeSpec()
	s.Rules = []spec.Rule{{Port: []uint16{dst.Port}, Outbound: "block"}, {Outbound: "direct3"}}
	sv, _ := run(t, s, Options{})
	if got := sv.Plane().Blocks; !slices.Equal(got, []int{0}) {
		t.Fatalf("block rules %v", got)
	}
	for _, m := range []plane.Mode{plane.ModeGlobal, plane.ModeDirect} {
		if err := sv.SetMode(m); err != nil {
			t.Fatal(err)
		}
		c, err := sv.conn.ConnectStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: dst, Inbound: "socks-in"})
		if err == nil {
			c.Close()
			t.Fatalf("%v mode: a flow the block rule refuses was opened", m)
		}
	}
}

// UDP follows the mode as TCP does: a new association's packets go to
// GLOBAL's choice in global mode, to direct in direct mode.
func TestModesRouteUDP(t *testing.T) {
	sv, _ := run(t, modeSpec(), Options{})
	echo := udpEcho(t)
	to := netx.AddrFromAddrPort(echo.LocalAddr().(*net.UDPAddr).AddrPort())
	subLink := func(port uint16) string {
		t.Helper()
		link := sv.conn.OpenAssociation(netx.Flow{Inbound: "socks-in", Src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)})
		defer link.Close()
		if err := link.WritePacket([]byte("ping"), to); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		if _, _, err := link.ReadPacket(buf); err != nil {
			t.Fatal(err)
		}
		for _, f := range sv.Tracker().Flows() {
			if f.Network == netx.UDP && f.Source.Port() == port {
				return f.Outbound
			}
		}
		t.Fatal("no UDP sub-link in the table")
		return ""
	}
	if got := subLink(5001); got != "direct2@v1" {
		t.Fatalf("rule mode: %s", got)
	}
	if err := sv.SelectGlobal("pick"); err != nil {
		t.Fatal(err)
	}
	if err := sv.SetMode(plane.ModeGlobal); err != nil {
		t.Fatal(err)
	}
	if got := subLink(5002); got != "direct3@v1" {
		t.Fatalf("global mode: %s", got)
	}
	if err := sv.SetMode(plane.ModeDirect); err != nil {
		t.Fatal(err)
	}
	if got := subLink(5003); got != "direct@v1" {
		t.Fatalf("direct mode: %s", got)
	}
}
