package api

import (
	"net"
	"slices"
	"strings"
	"sync"
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

// A Selector's choice that keeps a pool shows its warm state: one
// pooled connection, retained by the selector owner, and the pool's idle
// bound, the starting 3 s while it is learned.
func TestNativeNodeWarmState(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // silent until the test ends
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	r := newRigWith(t, Options{}, `
[[outbounds]]
tag = "ss1"
type = "shadowsocks"
server = "`+ln.Addr().String()+`"
method = "aes-128-gcm"
password = "secret"

[[groups]]
tag = "pinned"
policy = "selector"
members = ["ss1"]
`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n struct {
			Warm *warmJSON
		}
		r.get(t, "/switchyard/v1/nodes/ss1", 200, &n)
		if n.Warm != nil && n.Warm.Kind == "pool" && n.Warm.Pooled == 1 && slices.Equal(n.Warm.Owners, []string{"selector"}) && n.Warm.LastAttempt != nil &&
			n.Warm.IdleBound != nil && *n.Warm.IdleBound == 3 && n.Warm.Learning != nil && *n.Warm.Learning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("warm state of ss1: %+v", n.Warm)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var d struct{ Warm *warmJSON }
	r.get(t, "/switchyard/v1/nodes/d1", 200, &d)
	if d.Warm != nil {
		t.Fatalf("a direct node has a warm state: %+v", d.Warm)
	}
}
