package api

import (
	"strings"
	"testing"
	"time"
)

// The native API: a selector write per network, each group's pick per
// network with its chain and reason, a node's six states, the admission
// counts.
func TestNativeAPI(t *testing.T) {
	r := newRig(t, Options{})
	var g groupJSON
	r.get(t, "/switchyard/v1/groups/pick", 200, &g)
	if g.Policy != "selector" || g.ID == "" || len(g.Members) != 2 || g.Networks["tcp"].Leaf != "d1" ||
		strings.Join(g.Networks["tcp"].Chain, ">") != "pick>d1" || g.Networks["tcp"].Reason == "" || len(g.Networks["udp"].Candidates) != 2 {
		t.Fatalf("group %+v", g)
	}
	// UDP alone moves to d2; TCP stays.
	if code, body := r.do(t, "PUT", "/switchyard/v1/groups/pick/select", "", `{"member":"d2","network":"udp"}`); code != 200 {
		t.Fatalf("select: %d %s", code, body)
	}
	r.get(t, "/switchyard/v1/groups/pick", 200, &g)
	if g.Networks["udp"].Leaf != "d2" || g.Networks["tcp"].Leaf != "d1" || g.Chosen["udp"] != "d2" {
		t.Fatalf("after a UDP write: tcp %s udp %s chosen %v", g.Networks["tcp"].Leaf, g.Networks["udp"].Leaf, g.Chosen)
	}
	if code, _ := r.do(t, "PUT", "/switchyard/v1/groups/pick/select", "", `{"member":"d2","network":"sctp"}`); code != 400 {
		t.Fatalf("a bad network: %d", code)
	}
	if code, _ := r.do(t, "PUT", "/switchyard/v1/groups/nope/select", "", `{"member":"d2"}`); code != 404 {
		t.Fatalf("an unknown group: %d", code)
	}
	var all struct{ Groups []groupJSON }
	r.get(t, "/switchyard/v1/groups", 200, &all)
	if len(all.Groups) != 2 {
		t.Fatalf("groups %d", len(all.Groups))
	}

	// A node's states: probed once by the rig's health (the web server).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n struct {
			ID     string
			States map[string]map[string]stateJSON
		}
		r.get(t, "/switchyard/v1/nodes/d1", 200, &n)
		tcp4 := n.States["tcp"]["ipv4"]
		if n.ID != "" && len(n.States) == 3 && len(n.States["tcp"]) == 2 && tcp4.Observed && tcp4.Alive && len(tcp4.History) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node d1: %+v", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var adm struct {
		Generation, Process struct{ Limit int }
	}
	r.get(t, "/switchyard/v1/admission", 200, &adm)
	if adm.Generation.Limit <= 0 || adm.Process.Limit <= 0 {
		t.Fatalf("admission %+v", adm)
	}
}
