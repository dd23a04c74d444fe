package api

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"
)

type proxyJSON struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	UDP     bool   `json:"udp"`
	Alive   bool   `json:"alive"`
	ID      string `json:"id"`
	History []struct {
		Time  time.Time `json:"time"`
		Delay int64     `json:"delay"`
	} `json:"history"`
	Extra   map[string]any `json:"extra"`
	Now     string         `json:"now"`
	All     []string       `json:"all"`
	TestURL string         `json:"testUrl"`
	Fixed   *string        `json:"fixed"`
	Hidden  *bool          `json:"hidden"`
	Icon    *string        `json:"icon"`
}

func TestHelloAndVersion(t *testing.T) {
	r := newRig(t, Options{Version: "1.2.3"})
	var hello map[string]string
	r.get(t, "/", 200, &hello)
	if hello["hello"] != "switchyard" {
		t.Fatalf("hello: %v", hello)
	}
	var v struct {
		Meta    bool   `json:"meta"`
		Version string `json:"version"`
	}
	r.get(t, "/version", 200, &v)
	if !v.Meta || v.Version != "1.2.3" {
		t.Fatalf("version: %+v", v)
	}
	var prov map[string]map[string]any
	r.get(t, "/providers/proxies", 200, &prov)
	if p, ok := prov["providers"]; !ok || len(p) != 0 {
		t.Fatalf("providers: %v", prov)
	}
	var e map[string]string
	r.get(t, "/nothing", 404, &e)
	if e["message"] == "" {
		t.Fatalf("a 404 without a message: %v", e)
	}
}

func TestProxies(t *testing.T) {
	r := newRig(t, Options{})
	var all struct {
		Proxies map[string]proxyJSON `json:"proxies"`
	}
	r.get(t, "/proxies", 200, &all)
	for name, typ := range map[string]string{"d1": "Direct", "d2": "Direct", "direct": "Direct", "block": "Reject",
		"pick": "Selector", "auto": "URLTest", "GLOBAL": "Selector"} {
		p, ok := all.Proxies[name]
		if !ok || p.Type != typ || p.Name != name {
			t.Fatalf("%s: %+v, want type %s", name, p, typ)
		}
		if p.History == nil || p.Extra == nil {
			t.Fatalf("%s: history and extra must be lists and maps, not null: %+v", name, p)
		}
	}
	d1 := all.Proxies["d1"]
	if !d1.Alive || d1.ID == "" || d1.All != nil || d1.Fixed != nil {
		t.Fatalf("an outbound: %+v", d1)
	}
	pick := all.Proxies["pick"]
	if pick.Now != "d1" || !slices.Equal(pick.All, []string{"d1", "d2"}) || pick.Fixed == nil || *pick.Fixed != "" ||
		pick.Hidden == nil || *pick.Hidden || pick.Icon == nil || pick.ID == "" || pick.TestURL != r.web.URL+"/generate_204" {
		t.Fatalf("a selector: %+v", pick)
	}
	g := all.Proxies["GLOBAL"]
	if g.Now != "pick" || !slices.Contains(g.All, "pick") || !slices.Contains(g.All, "auto") || !slices.Contains(g.All, "d2") {
		t.Fatalf("GLOBAL: %+v", g)
	}

	var one proxyJSON
	r.get(t, "/proxies/auto", 200, &one)
	if one.Name != "auto" || one.Type != "URLTest" || len(one.All) != 2 {
		t.Fatalf("one group: %+v", one)
	}
	r.get(t, "/proxies/"+url.PathEscape("no such"), 404, nil)

	var groups struct {
		Proxies []proxyJSON `json:"proxies"`
	}
	r.get(t, "/group", 200, &groups)
	if len(groups.Proxies) != 2 || groups.Proxies[0].Name != "pick" || groups.Proxies[1].Name != "auto" {
		t.Fatalf("/group: %+v", groups)
	}
	r.get(t, "/group/pick", 200, &one)
	if one.Name != "pick" || one.Type != "Selector" {
		t.Fatalf("/group/pick: %+v", one)
	}
	r.get(t, "/group/d1", 404, nil)
}

func TestSelectThroughPut(t *testing.T) {
	r := newRig(t, Options{})
	dst := echo(t)
	old := r.flow(t, dst)
	var conns connsJSON
	r.get(t, "/connections", 200, &conns)
	if len(conns.Connections) != 1 || !slices.Equal(conns.Connections[0].Chains, []string{"d1", "pick"}) {
		t.Fatalf("before: %+v", conns.Connections)
	}

	for _, bad := range []struct {
		path, body string
		want       int
	}{
		{"/proxies/pick", `{"name":"nope"}`, 400},
		{"/proxies/pick", `not json`, 400},
		{"/proxies/auto", `{"name":"d2"}`, 400},
		{"/proxies/d1", `{"name":"d2"}`, 400},
		{"/proxies/GLOBAL", `{"name":"nope"}`, 400},
		{"/proxies/nope", `{"name":"d2"}`, 404},
	} {
		if code, b := r.do(t, "PUT", bad.path, "", bad.body); code != bad.want {
			t.Fatalf("PUT %s %s: %d %s, want %d", bad.path, bad.body, code, b, bad.want)
		}
	}
	if code, b := r.do(t, "PUT", "/proxies/pick", "", `{"name":"d2"}`); code != 204 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	// The selector interrupts by default: the flow on d1 is closed.
	waitClosed(t, old)
	var p proxyJSON
	r.get(t, "/proxies/pick", 200, &p)
	if p.Now != "d2" {
		t.Fatalf("now after the switch: %q", p.Now)
	}
	r.flow(t, dst)
	r.get(t, "/connections", 200, &conns)
	if len(conns.Connections) != 1 || !slices.Equal(conns.Connections[0].Chains, []string{"d2", "pick"}) {
		t.Fatalf("the next flow: %+v", conns.Connections)
	}
}

func TestDelay(t *testing.T) {
	r := newRig(t, Options{})
	var d map[string]int64
	r.get(t, "/proxies/d1/delay?timeout=2000&url="+url.QueryEscape(r.web.URL+"/x"), 200, &d)
	if d["delay"] <= 0 {
		t.Fatalf("delay: %v", d)
	}
	// A group measures its current leaf.
	r.get(t, "/proxies/pick/delay?timeout=2000&url="+url.QueryEscape(r.web.URL+"/x"), 200, &d)
	var p proxyJSON
	r.get(t, "/proxies/d1", 200, &p)
	if len(p.History) == 0 || p.History[len(p.History)-1].Delay <= 0 {
		t.Fatalf("the test is in the history: %+v", p.History)
	}
	var e map[string]string
	r.get(t, "/proxies/d1/delay?timeout=200&url="+url.QueryEscape(r.web.URL+"/hang"), 504, &e)
	if e["message"] != "Timeout" {
		t.Fatalf("timeout: %v", e)
	}
	r.get(t, "/proxies/d1/delay?timeout=2000&url="+url.QueryEscape("http://127.0.0.1:9/x"), 503, &e)
	r.get(t, "/proxies/d1/delay?timeout=abc", 400, nil)
	r.get(t, "/proxies/nope/delay?timeout=100", 404, nil)
	// direct is no group's member: health does not hold it, the test
	// runs through it once and records nothing.
	r.get(t, "/proxies/direct/delay?timeout=2000&url="+url.QueryEscape(r.web.URL+"/x"), 200, &d)
	if d["delay"] <= 0 {
		t.Fatalf("delay of an outbound no group reaches: %v", d)
	}
	r.get(t, "/proxies/direct", 200, &p)
	if len(p.History) != 0 {
		t.Fatalf("a one-off test is not in the history: %+v", p.History)
	}
	r.get(t, "/proxies/direct/delay?timeout=200&url="+url.QueryEscape(r.web.URL+"/hang"), 504, &e)
	r.get(t, "/proxies/direct/delay?timeout=2000&url="+url.QueryEscape("http://127.0.0.1:9/x"), 503, &e)

	var g map[string]int64
	r.get(t, "/group/auto/delay?timeout=2000&url="+url.QueryEscape(r.web.URL+"/x"), 200, &g)
	if len(g) != 2 || g["d1"] <= 0 || g["d2"] <= 0 {
		t.Fatalf("group delay: %v", g)
	}
	r.get(t, "/group/auto/delay?timeout=200&url="+url.QueryEscape(r.web.URL+"/hang"), 504, &e)
	r.get(t, "/group/d1/delay", 404, nil)
}

// A failover balancer shows its first healthy member as now, and is alive
// while a member is.
func TestABalancerShowsItsCurrentMember(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := down.Addr().String()
	down.Close()
	r := newRigWith(t, Options{}, fmt.Sprintf(`
[[outbounds]]
tag = "s1"
type = "socks"
server = %q

[[outbounds]]
tag = "s2"
type = "socks"
server = %q

[[balancers]]
tag = "pool"
members = ["s1", "s2"]
strategy = "failover"
probe_interval = "50ms"
probe_timeout = "1s"
`, deadAddr, up.Addr().String()))
	deadline := time.Now().Add(5 * time.Second)
	for {
		var p proxyJSON
		r.get(t, "/proxies/pool", 200, &p)
		if p.Type != "Fallback" || !slices.Equal(p.All, []string{"s1", "s2"}) {
			t.Fatalf("the balancer: %+v", p)
		}
		if p.Now == "s2" && p.Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("s1 is dead, now is still %q (alive %v)", p.Now, p.Alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
