package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
	"switchyard/spec"
	"switchyard/store"
)

// selectorSpec routes everything to a selector "pick" over direct2 and
// direct.
func selectorSpec() *spec.Spec {
	s := baseSpec()
	s.Groups = []spec.Group{{Tag: "pick", Policy: "selector", Members: []string{"direct2", "direct"}, Interrupt: true}}
	s.Route.Final = "pick"
	// Probes stay on loopback (the discard port refuses them at once).
	s.Health = spec.Health{TCPCheckURLs: []string{"http://127.0.0.1:9/generate_204"}, CheckInterval: time.Hour, CheckTimeout: time.Second}
	return s
}

// leafOf dials through the supervisor and returns the leaf the flow went
// to, as the flow table shows it.
func leafOf(t *testing.T, sv *Supervisor) string {
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
	return flows[len(flows)-1].Outbound
}

func TestAFlowRoutedToAGroupGoesToItsPick(t *testing.T) {
	sv, _ := run(t, selectorSpec(), Options{})
	if got := leafOf(t, sv); got != "direct2@v1" {
		t.Fatalf("first member by default: flow on %s", got)
	}
	if _, err := sv.SelectGroup("pick", "direct"); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); got != "direct@v1" {
		t.Fatalf("after the write: flow on %s", got)
	}
	if _, err := sv.SelectGroup("pick", "block2"); !errors.Is(err, group.ErrNotMember) {
		t.Fatalf("a non-member: %v", err)
	}
	if _, err := sv.SelectGroup("nope", "direct"); !errors.Is(err, group.ErrUnknownGroup) {
		t.Fatalf("an unknown group: %v", err)
	}
}

// A selector's choice survives a reload that keeps the group, and a restart
// through the store.
func TestASelectorChoiceSurvivesAReloadAndARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st := store.Open(path, slog.New(slog.DiscardHandler))
	sv, _ := run(t, selectorSpec(), Options{Store: st})
	if _, err := sv.SelectGroup("pick", "direct"); err != nil {
		t.Fatal(err)
	}
	// A reload that changes a member rebuilds the group: the choice moves
	// over by identity.
	s2 := selectorSpec()
	s2.Outbounds[0].AddressFamily = "ipv4_only"
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if got := leafOf(t, sv); got != "direct@v2" {
		t.Fatalf("after a reload: flow on %s", got)
	}
	sv.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := store.Open(path, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { st2.Close() })
	sv2, _ := run(t, selectorSpec(), Options{Store: st2})
	if got := leafOf(t, sv2); got != "direct@v1" {
		t.Fatalf("after a restart: flow on %s", got)
	}
}

// A group write with no group configured says so.
func TestASelectWithoutGroups(t *testing.T) {
	sv, _ := run(t, baseSpec(), Options{})
	if _, err := sv.SelectGroup("pick", "direct"); !errors.Is(err, ErrNoGroups) {
		t.Fatalf("%v", err)
	}
}

// A group keeps its identity across a reload that keeps its name, however
// the groups are reordered; a renamed group is a new group.
func TestGroupIdentityFollowsTheName(t *testing.T) {
	s := selectorSpec()
	s.Groups = append(s.Groups, spec.Group{Tag: "other", Policy: "fallback", Members: []string{"direct"}})
	sv, _ := run(t, s, Options{})
	ids := func() map[string]group.Identity {
		m := map[string]group.Identity{}
		for _, g := range sv.Groups().Groups() {
			m[g.Tag] = g.Identity
		}
		return m
	}
	before := ids()
	s2 := selectorSpec()
	s2.Groups = append([]spec.Group{{Tag: "other", Policy: "fallback", Members: []string{"direct"}}}, s2.Groups...)
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	after := ids()
	if after["pick"] != before["pick"] || after["other"] != before["other"] {
		t.Fatalf("identities changed by a reorder: %v → %v", before, after)
	}
	s3 := selectorSpec()
	s3.Groups = append(s3.Groups, spec.Group{Tag: "renamed", Policy: "fallback", Members: []string{"direct"}})
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	renamed := ids()
	if renamed["renamed"].ID == before["other"].ID || renamed["pick"] != before["pick"] {
		t.Fatalf("a renamed group kept the old identity: %v → %v", before, renamed)
	}
}

// The connectivity hook hears a group's slots: alive while its leaves are,
// and a change when the only alive leaf dies.
func TestTheConnectivityHookHearsAGroupsSlots(t *testing.T) {
	type slot struct {
		group string
		d     health.Domain
		f     netx.Family
	}
	var mu sync.Mutex
	last := map[slot]bool{}
	// A fallback group: a selector's TCP slot stays alive while its choice
	// is one leaf, whose flows still go there (its last resort).
	s := selectorSpec()
	s.Groups[0].Policy = "fallback"
	clock := healthtest.NewClock(time.Now())
	sv, _ := run(t, s, Options{clock: clock, GroupConnectivity: func(g string, d health.Domain, f netx.Family, alive bool) {
		mu.Lock()
		defer mu.Unlock()
		last[slot{g, d, f}] = alive
	}})
	read := func(d health.Domain) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := last[slot{"pick", d, netx.V4}]
		return v, ok
	}
	if v, ok := read(health.TCP); !ok || !v {
		t.Fatalf("pick tcp4 slot %v (published %v), want alive", v, ok)
	}
	// Past the new nodes' grace, both leaves fail ten real flows in a row:
	// the group's TCP slot dies.
	clock.Advance(health.Grace + time.Second)
	eng := sv.engine.Load()
	for _, tag := range []string{"direct", "direct2"} {
		id := sv.cur.nodeIDs[tag]
		for range 10 {
			eng.ReportTraffic(id, health.TCP, netx.V4, false)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, ok := read(health.TCP); ok && !v {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group's tcp4 slot did not die with its leaves")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
