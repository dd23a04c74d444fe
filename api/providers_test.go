package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/provider"
	"switchyard/remote"
	"switchyard/test/socksclient"
)

// metacubexd's rules page asks GET /providers/rules next to /rules; a 404
// there shows as a failed request. With no rule providers it is an empty
// map, as /providers/proxies is, in the shape mihomo answers.
func TestRuleProvidersEmpty(t *testing.T) {
	r := newRig(t, Options{Secret: "s"})
	var prov map[string]map[string]any
	r.get(t, "/providers/rules", 200, &prov)
	if p, ok := prov["providers"]; !ok || len(p) != 0 {
		t.Fatalf("GET /providers/rules: %v, want {\"providers\": {}}", prov)
	}
	if code, _ := r.do(t, "GET", "/providers/rules", "", ""); code != 401 {
		t.Fatalf("GET /providers/rules without the secret: %d, want 401", code)
	}
}

// subServer serves a subscription with an ETag and a
// subscription-userinfo header; full counts the bodies sent.
type subServer struct {
	*httptest.Server
	mu   sync.Mutex
	body string
	full atomic.Int32
}

func newSubServer(t *testing.T) *subServer {
	s := &subServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		etag := `"` + strings.NewReplacer(":", "", "/", "", "\n", "", "#", "", ".", "").Replace(body) + `"`
		w.Header().Set("ETag", etag)
		w.Header().Set("Subscription-Userinfo", "upload=1024; download=2048; total=1073741824; expire=1893456000")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		s.full.Add(1)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *subServer) set(body string) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

type providersView struct {
	Providers map[string]struct {
		Name             string
		Type             string
		VehicleType      string
		Proxies          []struct{ Name, Type string }
		TestURL          string
		UpdatedAt        *time.Time
		SubscriptionInfo *remote.UserInfo
	}
}

// A url provider over the API: PUT downloads it now and applies it; a
// change of one node rebuilds that node only (its flows drained, the
// others' flows, versions and health identities kept); a second PUT with
// nothing new is a 304 and no apply; content that does not parse is the
// PUT's error and keeps the nodes; the userinfo is shown.
func TestProviderUpdateOverTheAPI(t *testing.T) {
	sub := newSubServer(t)
	cache := filepath.Join(t.TempDir(), "sub.txt")
	extra := `
[[inbounds]]
tag = "entry"
type = "socks"
listen = "127.0.0.1:0"

[[providers]]
tag = "sub"
url = "` + sub.URL + `/sub?token=x"
path = "` + cache + `"

[[groups]]
tag = "subs"
policy = "selector"
use = ["sub"]
interrupt = false

[[rules]]
inbound = ["entry"]
outbound = "subs"

[reload]
drain = "close"
`
	var rg *rig
	var applies atomic.Int32
	text := ""
	dial := func(ctx context.Context, via, network, addr string) (net.Conn, error) {
		return rg.sv.DialVia(ctx, via, network, addr)
	}
	u := remote.New(nil, remote.Options{
		Fetcher: &remote.Fetcher{Dial: dial},
		OnChange: func(remote.Resource) error {
			s, _, err := config.Parse([]byte(text), "api-test.toml")
			if err != nil {
				return err
			}
			if err := rg.sv.Apply(s); err != nil {
				return err
			}
			applies.Add(1)
			rg.srv.SetSpec(s)
			return nil
		},
	})
	t.Cleanup(u.Close)
	rg = newRigWith(t, Options{Secret: "s", Downloads: u}, extra)
	text = strings.ReplaceAll(baseConfig+extra, "WEB", rg.web.URL)
	u.Reconfigure([]remote.Resource{{Kind: remote.KindProvider, Tag: "sub", URL: sub.URL + "/sub?token=x", Via: "direct", CachePath: cache,
		Validate: func(b []byte) (int, error) { n, _, err := provider.Parse(b); return len(n), err }}})

	var pv providersView
	rg.get(t, "/providers/proxies", 200, &pv)
	if p := pv.Providers["sub"]; p.VehicleType != "HTTP" || p.Type != "Proxy" || len(p.Proxies) != 0 || p.UpdatedAt != nil {
		t.Fatalf("before the download: %+v", p)
	}

	up := rg.sv.Addr("socks-in").String()
	sub.set("socks5://" + up + "#A\nsocks5://" + up + "#B\nsocks5://" + up + "#C\n")
	if code, b := rg.do(t, "PUT", "/providers/proxies/sub", "s", ""); code != 204 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	rg.get(t, "/providers/proxies", 200, &pv)
	p := pv.Providers["sub"]
	if len(p.Proxies) != 3 || p.Proxies[0].Name != "A" || p.Proxies[0].Type != "Socks5" || p.UpdatedAt == nil ||
		p.SubscriptionInfo == nil || *p.SubscriptionInfo != (remote.UserInfo{Upload: 1024, Download: 2048, Total: 1073741824, Expire: 1893456000}) {
		t.Fatalf("after the download: %+v", p)
	}
	var one struct{ Name string }
	rg.get(t, "/providers/proxies/sub", 200, &one)
	if one.Name != "sub" {
		t.Fatalf("GET /providers/proxies/sub: %+v", one)
	}

	dst := echo(t)
	open := func() net.Conn {
		c, err := socksclient.Dial(rg.sv.Addr("entry").String(), dst, "", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := echoRound(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	onA := open()
	if code, b := rg.do(t, "PUT", "/proxies/subs", "s", `{"name":"B"}`); code != 204 {
		t.Fatalf("select B: %d %s", code, b)
	}
	onB := open()
	idA, _ := rg.sv.NodeID("A")
	versions := map[string]uint32{}
	for _, n := range []string{"A", "B", "C"} {
		versions[n] = rg.sv.Plane().Targets[n].ID().Version
	}

	// B moves; A and C stay.
	sub.set("socks5://" + up + "#A\nsocks5://127.0.0.1:1#B\nsocks5://" + up + "#C\n")
	if code, b := rg.do(t, "PUT", "/providers/proxies/sub", "s", ""); code != 204 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	for n, v := range versions {
		got := rg.sv.Plane().Targets[n].ID().Version
		if (n == "B") != (got != v) {
			t.Errorf("%s: version %d, was %d", n, got, v)
		}
	}
	if id, _ := rg.sv.NodeID("A"); id != idA {
		t.Errorf("A's health identity changed: %v, was %v", id, idA)
	}
	if err := echoRound(onA); err != nil {
		t.Fatalf("the flow on the unchanged node: %v", err)
	}
	waitClosed(t, onB)

	// Nothing new: a 304, no apply.
	before, full := applies.Load(), sub.full.Load()
	if code, _ := rg.do(t, "PUT", "/providers/proxies/sub", "s", ""); code != 204 || applies.Load() != before || sub.full.Load() != full {
		t.Fatalf("PUT of an unchanged subscription: %d, applies %d -> %d, bodies %d -> %d", code, before, applies.Load(), full, sub.full.Load())
	}

	// A maintenance page: refused, the nodes stay.
	sub.set("<html>down for maintenance</html>")
	code, b := rg.do(t, "PUT", "/providers/proxies/sub", "s", "")
	if code != 503 || !strings.Contains(string(b), "does not load") {
		t.Fatalf("PUT of bad content: %d %s", code, b)
	}
	var still struct{ Proxies []struct{ Name string } }
	rg.get(t, "/providers/proxies/sub", 200, &still)
	if len(still.Proxies) != 3 {
		t.Fatalf("after bad content: %+v", still)
	}
	if got, _ := os.ReadFile(cache); !strings.Contains(string(got), "#A") {
		t.Fatalf("the cache was replaced: %q", got)
	}
	if _, ok := rg.sv.Plane().Targets["A"]; !ok {
		t.Fatal("the nodes are gone after bad content")
	}

	if code, _ := rg.do(t, "PUT", "/providers/proxies/nope", "s", ""); code != 404 {
		t.Fatalf("PUT of an unknown provider: %d", code)
	}
	if code, b := rg.do(t, "GET", "/providers/proxies/sub/healthcheck", "s", ""); code != 204 {
		t.Fatalf("healthcheck: %d %s", code, b)
	}
	var a struct{ History []struct{ Delay int64 } }
	rg.get(t, "/proxies/A", 200, &a)
	if len(a.History) == 0 || a.History[len(a.History)-1].Delay == 0 {
		t.Fatalf("A after the healthcheck: %+v", a)
	}
	if code, b := rg.do(t, "GET", "/providers/proxies/sub/A/healthcheck?url="+rg.web.URL+"/generate_204", "s", ""); code != 200 || !strings.Contains(string(b), "delay") {
		t.Fatalf("healthcheck of A: %d %s", code, b)
	}
}

func echoRound(c net.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	_, err := io.ReadFull(c, make([]byte, 4))
	return err
}

// A file provider and rule sets are listed too; a file one's PUT applies
// the running configuration again (Reapply).
func TestFileProvidersAndRuleProviders(t *testing.T) {
	dir := t.TempDir()
	writeFile(filepath.Join(dir, "sub.txt"), "socks5://127.0.0.1:1#A\n")
	writeFile(filepath.Join(dir, "ads.txt"), "+.ads.example\n+.track.example\nexample.org\n")
	extra := `
[[providers]]
tag = "file"
path = "` + filepath.Join(dir, "sub.txt") + `"

[[rule_sets]]
tag = "ads"
path = "` + filepath.Join(dir, "ads.txt") + `"
format = "clash-domain"

[[rule_sets]]
tag = "remote-ads"
url = "http://127.0.0.1:1/ads.txt"
path = "` + filepath.Join(dir, "remote-ads.txt") + `"
format = "clash-domain"

[[rules]]
rule_set = ["ads", "remote-ads"]
outbound = "block"
`
	var reapplied atomic.Int32
	rg := newRigWith(t, Options{Secret: "s", Reapply: func() error { reapplied.Add(1); return nil }}, extra)
	var pv providersView
	rg.get(t, "/providers/proxies", 200, &pv)
	if p := pv.Providers["file"]; p.VehicleType != "File" || len(p.Proxies) != 1 || p.UpdatedAt == nil {
		t.Fatalf("file provider %+v", p)
	}
	var rv struct {
		Providers map[string]struct {
			Name, Type, VehicleType, Behavior, Format string
			RuleCount                                 int
			UpdatedAt                                 *time.Time
		}
	}
	rg.get(t, "/providers/rules", 200, &rv)
	if a := rv.Providers["ads"]; a.Type != "Rule" || a.VehicleType != "File" || a.Behavior != "Domain" || a.Format != "clash-domain" || a.RuleCount != 3 || a.UpdatedAt == nil {
		t.Fatalf("ads %+v", a)
	}
	if a := rv.Providers["remote-ads"]; a.VehicleType != "HTTP" || a.RuleCount != 0 || a.UpdatedAt != nil {
		t.Fatalf("remote-ads %+v", a)
	}
	if code, _ := rg.do(t, "PUT", "/providers/proxies/file", "s", ""); code != 204 || reapplied.Load() != 1 {
		t.Fatalf("PUT of a file provider: %d, reapplied %d", code, reapplied.Load())
	}
	if code, _ := rg.do(t, "PUT", "/providers/rules/ads", "s", ""); code != 204 || reapplied.Load() != 2 {
		t.Fatalf("PUT of a file rule set: %d, reapplied %d", code, reapplied.Load())
	}
	if code, _ := rg.do(t, "PUT", "/providers/rules/remote-ads", "s", ""); code != 501 {
		t.Fatalf("PUT of a url rule set without downloads: %d", code)
	}
}
