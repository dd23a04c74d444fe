package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// scoreConfig adds a Score group over the rig's two outbounds, taking
// every flow to loopback.
const scoreConfig = `
[[groups]]
tag = "smart"
policy = "score"
members = ["d1", "d2"]

[[rules]]
ip_cidr = ["127.0.0.0/8"]
outbound = "smart"
`

// GET /switchyard/v1/stats/score is behind the secret and serves every
// Score group's counters by name and network, with the caches' totals;
// a flow through the group is counted in them. It names no node.
func TestTheScoreStatsEndpoint(t *testing.T) {
	r := newRigWith(t, Options{Secret: "s3"}, scoreConfig)
	if code, _ := r.do(t, "GET", "/switchyard/v1/stats/score", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("without the secret: %d", code)
	}
	dst := echo(t)
	for range 3 {
		r.flow(t, dst).Close()
	}
	code, b := r.do(t, "GET", "/switchyard/v1/stats/score", "s3", "")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	var st struct {
		Groups []struct {
			Group   string           `json:"group"`
			Network string           `json:"network"`
			Reasons map[string]int64 `json:"reasons"`
			Budget  struct {
				Originals int64 `json:"originals"`
			} `json:"budget"`
			Pool struct {
				Capacity int `json:"capacity"`
				Members  int `json:"members"`
			} `json:"pool"`
			DeadFiltered *int64 `json:"deadFiltered"`
		} `json:"groups"`
		Cache *struct {
			ExactCells     int `json:"exactCells"`
			AggregateCells int `json:"aggregateCells"`
		} `json:"cache"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 2 || st.Cache == nil {
		t.Fatalf("stats %s: want smart on tcp and udp, and the caches", b)
	}
	for _, g := range st.Groups {
		if g.Group != "smart" || g.DeadFiltered == nil || len(g.Reasons) != 9 {
			t.Fatalf("group stats %+v", g)
		}
		if g.Network == "tcp" {
			var n int64
			for _, v := range g.Reasons {
				n += v
			}
			if n != 3 || g.Budget.Originals != 3 || g.Pool.Members != 2 {
				t.Fatalf("after three flows: reasons %v (sum %d), originals %d, pool %+v", g.Reasons, n, g.Budget.Originals, g.Pool)
			}
		}
	}
	for _, id := range []string{r.nodeID(t, "d1"), r.nodeID(t, "d2")} {
		if strings.Contains(string(b), id) {
			t.Fatalf("the stats name a node: %s", b)
		}
	}
}

func (r *rig) nodeID(t *testing.T, tag string) string {
	t.Helper()
	id, ok := r.sv.NodeID(tag)
	if !ok {
		t.Fatalf("no node %s", tag)
	}
	return id.String()
}

// The Clash view shows a Score group as URLTest with now its aggregate
// TCP winner, and refuses to fix it by PUT, as for a URLTest.
func TestTheClashViewOfAScoreGroup(t *testing.T) {
	r := newRigWith(t, Options{}, scoreConfig)
	var p struct {
		Type string   `json:"type"`
		Now  string   `json:"now"`
		All  []string `json:"all"`
	}
	r.get(t, "/proxies/smart", http.StatusOK, &p)
	if p.Type != "URLTest" || (p.Now != "d1" && p.Now != "d2") || len(p.All) != 2 {
		t.Fatalf("proxy %+v", p)
	}
	var g struct {
		Proxies []struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Now  string `json:"now"`
		} `json:"proxies"`
	}
	r.get(t, "/group", http.StatusOK, &g)
	found := false
	for _, x := range g.Proxies {
		if x.Name == "smart" {
			// now is read again: the aggregate winner of two unproven
			// nodes follows their probe RTTs from one read to the next.
			found = x.Type == "URLTest" && (x.Now == "d1" || x.Now == "d2")
		}
	}
	if !found {
		t.Fatalf("/group %+v", g)
	}
	code, b := r.do(t, "PUT", "/proxies/smart", "", `{"name":"d2"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "Must be a Selector") {
		t.Fatalf("PUT: %d %s", code, b)
	}
	if code, _ := r.do(t, "DELETE", "/proxies/smart", "", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d, want 204 (nothing fixed), as for a URLTest", code)
	}
	// The native view explains the aggregate ranking.
	var ng struct {
		Policy   string `json:"policy"`
		Networks map[string]struct {
			Reason     string `json:"reason"`
			Candidates []struct {
				Utility *float64 `json:"utility"`
			} `json:"candidates"`
		} `json:"networks"`
	}
	r.get(t, "/switchyard/v1/groups/smart", http.StatusOK, &ng)
	tcp := ng.Networks["tcp"]
	if ng.Policy != "score" || tcp.Reason != "score_aggregate" || len(tcp.Candidates) != 2 || tcp.Candidates[0].Utility == nil {
		t.Fatalf("native group %+v", ng)
	}
}
