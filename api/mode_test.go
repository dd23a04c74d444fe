package api

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/store"
	"switchyard/supervisor"
)

// storedRig is a rig whose supervisor keeps its state in the store at
// path; stop ends it (the store closed last) for a restart on the same
// file.
func storedRig(t *testing.T, path string) (r *rig, stop func()) {
	t.Helper()
	s, _, err := config.Parse([]byte(strings.ReplaceAll(baseConfig, "WEB", "http://127.0.0.1:9")), "api-test.toml")
	if err != nil {
		t.Fatal(err)
	}
	st := store.Open(path, slog.New(slog.DiscardHandler))
	sv, err := supervisor.New(s, supervisor.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	srv := New(sv, Options{Spec: s})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		srv.Close()
		sv.Close()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return &rig{sv: sv, srv: srv, spec: s, base: "http://" + srv.Addr().String()}, stop
}

func (r *rig) mode(t *testing.T) string {
	t.Helper()
	var c map[string]any
	r.get(t, "/configs", 200, &c)
	m, _ := c["mode"].(string)
	return m
}

func (r *rig) patch(t *testing.T, body string, want int) map[string]string {
	t.Helper()
	code, b := r.do(t, "PATCH", "/configs", "", body)
	if code != want {
		t.Fatalf("PATCH /configs %s: %d %s, want %d", body, code, b, want)
	}
	var e map[string]string
	if want != 204 {
		if err := json.Unmarshal(b, &e); err != nil || e["message"] == "" {
			t.Fatalf("PATCH /configs %s: %s is no {\"message\"}", body, b)
		}
	}
	return e
}

// chains is the chain of the only open connection, as /connections shows
// it (leaf first).
func (r *rig) chains(t *testing.T) []string {
	t.Helper()
	var conns connsJSON
	r.get(t, "/connections", 200, &conns)
	if len(conns.Connections) != 1 {
		t.Fatalf("connections: %+v", conns.Connections)
	}
	return conns.Connections[0].Chains
}

func TestModeThroughConfigs(t *testing.T) {
	r := newRig(t, Options{})
	var c struct {
		Mode     string   `json:"mode"`
		ModeList []string `json:"mode-list"`
	}
	r.get(t, "/configs", 200, &c)
	if c.Mode != "rule" || !slices.Equal(c.ModeList, []string{"rule", "global", "direct"}) {
		t.Fatalf("configs: %+v", c)
	}
	dst := echo(t)
	// rule: the final, pick -> d1.
	f := r.flow(t, dst)
	if got := r.chains(t); !slices.Equal(got, []string{"d1", "pick"}) {
		t.Fatalf("rule mode: %v", got)
	}
	f.Close()
	waitNoFlows(t, r)

	if code, b := r.do(t, "PUT", "/proxies/GLOBAL", "", `{"name":"d2"}`); code != 204 {
		t.Fatalf("PUT GLOBAL: %d %s", code, b)
	}
	r.patch(t, `{"mode":"Global"}`, 204) // any case
	if m := r.mode(t); m != "global" {
		t.Fatalf("mode after PATCH: %q", m)
	}
	f = r.flow(t, dst)
	if got := r.chains(t); !slices.Equal(got, []string{"d2", "GLOBAL"}) {
		t.Fatalf("global mode: %v", got)
	}
	// The open flow is not cut by the next change.
	r.patch(t, `{"mode":"direct"}`, 204)
	if got := r.chains(t); !slices.Equal(got, []string{"d2", "GLOBAL"}) {
		t.Fatalf("the flow open before the change: %v", got)
	}
	if _, err := f.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitNoFlows(t, r)
	r.flow(t, dst)
	if got := r.chains(t); !slices.Equal(got, []string{"direct"}) {
		t.Fatalf("direct mode: %v", got)
	}

	for _, body := range []string{`{"mode":"script"}`, `{"mode":1}`, `{"mode":""}`} {
		if e := r.patch(t, body, 400); !strings.Contains(e["message"], "mode") {
			t.Fatalf("%s: %v", body, e)
		}
	}
	// A refused PATCH changes nothing, the log level included.
	r.patch(t, `{"mode":"rule","log-level":"loud"}`, 400)
	if m := r.mode(t); m != "direct" {
		t.Fatalf("a refused PATCH changed the mode to %q", m)
	}
}

func waitNoFlows(t *testing.T, r *rig) {
	t.Helper()
	for range 500 {
		if len(r.sv.Tracker().Flows()) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the flow stays in the table")
}

func TestGlobalSelector(t *testing.T) {
	r := newRig(t, Options{})
	var p proxyJSON
	r.get(t, "/proxies/GLOBAL", 200, &p)
	want := []string{"pick", "auto", "d1", "d2", "direct", "block"}
	if p.Type != "Selector" || p.Now != "pick" || !slices.Equal(p.All, want) {
		t.Fatalf("GLOBAL: %+v, want now pick (the final) over %v", p, want)
	}
	if code, b := r.do(t, "PUT", "/proxies/GLOBAL", "", `{"name":"auto"}`); code != 204 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	r.get(t, "/proxies/GLOBAL", 200, &p)
	if p.Now != "auto" {
		t.Fatalf("now after PUT: %q", p.Now)
	}
	var all struct {
		Proxies map[string]proxyJSON `json:"proxies"`
	}
	r.get(t, "/proxies", 200, &all)
	if all.Proxies["GLOBAL"].Now != "auto" {
		t.Fatalf("/proxies GLOBAL: %+v", all.Proxies["GLOBAL"])
	}
	code, b := r.do(t, "PUT", "/proxies/GLOBAL", "", `{"name":"GLOBAL"}`)
	if code != 400 || !strings.Contains(string(b), "not a member of GLOBAL") {
		t.Fatalf("GLOBAL in itself: %d %s", code, b)
	}
	// A delay test of GLOBAL measures its member's leaf.
	if code, _ := r.do(t, "GET", "/proxies/GLOBAL/delay?timeout=2000&url=http://127.0.0.1:9/", "", ""); code == 404 || code == 400 {
		t.Fatalf("GLOBAL delay: %d", code)
	}
}

func TestDeleteProxy(t *testing.T) {
	r := newRig(t, Options{})
	for _, put := range [][2]string{{"pick", "d2"}, {"GLOBAL", "d1"}} {
		if code, b := r.do(t, "PUT", "/proxies/"+put[0], "", `{"name":"`+put[1]+`"}`); code != 204 {
			t.Fatalf("PUT %s: %d %s", put[0], code, b)
		}
	}
	var p proxyJSON
	for _, c := range []struct {
		name string
		want int
		now  string // after
	}{
		{"pick", 204, "d1"},     // the selector back to its first member
		{"GLOBAL", 204, "pick"}, // back to the final
		{"pick", 204, "d1"},     // nothing chosen: nothing to clear
		{"auto", 204, ""},       // a URLTest has nothing fixed
		{"d1", 400, ""},
		{"direct", 400, ""},
		{"nope", 404, ""},
	} {
		code, b := r.do(t, "DELETE", "/proxies/"+c.name, "", "")
		if code != c.want {
			t.Fatalf("DELETE %s: %d %s, want %d", c.name, code, b, c.want)
		}
		if c.want != 204 && !strings.Contains(string(b), `"message"`) {
			t.Fatalf("DELETE %s: %s", c.name, b)
		}
		if c.now != "" {
			r.get(t, "/proxies/"+c.name, 200, &p)
			if p.Now != c.now || p.Fixed == nil || *p.Fixed != "" {
				t.Fatalf("%s after DELETE: now %q fixed %v, want %q", c.name, p.Now, p.Fixed, c.now)
			}
		}
	}
}

// A DELETE of a selector interrupts the flows on the old choice, as a
// switch does.
func TestDeleteProxyInterrupts(t *testing.T) {
	r := newRig(t, Options{})
	if code, _ := r.do(t, "PUT", "/proxies/pick", "", `{"name":"d2"}`); code != 204 {
		t.Fatal(code)
	}
	old := r.flow(t, echo(t))
	if code, b := r.do(t, "DELETE", "/proxies/pick", "", ""); code != 204 {
		t.Fatalf("DELETE: %d %s", code, b)
	}
	waitClosed(t, old)
}

// The mode and the GLOBAL choice, and a cleared selector choice, survive a
// restart on the same state file.
func TestModeAndGlobalArePersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	r, stop := storedRig(t, path)
	r.patch(t, `{"mode":"global"}`, 204)
	for _, put := range [][2]string{{"GLOBAL", "d2"}, {"pick", "d2"}} {
		if code, b := r.do(t, "PUT", "/proxies/"+put[0], "", `{"name":"`+put[1]+`"}`); code != 204 {
			t.Fatalf("PUT %s: %d %s", put[0], code, b)
		}
	}
	if code, _ := r.do(t, "DELETE", "/proxies/pick", "", ""); code != 204 {
		t.Fatal(code)
	}
	stop()

	r, _ = storedRig(t, path)
	if m := r.mode(t); m != "global" {
		t.Fatalf("mode after a restart: %q", m)
	}
	var p proxyJSON
	r.get(t, "/proxies/GLOBAL", 200, &p)
	if p.Now != "d2" {
		t.Fatalf("GLOBAL after a restart: %q", p.Now)
	}
	r.get(t, "/proxies/pick", 200, &p)
	if p.Now != "d1" {
		t.Fatalf("a cleared selector after a restart: %q", p.Now)
	}
	r.flow(t, echo(t))
	if got := r.chains(t); !slices.Equal(got, []string{"d2", "GLOBAL"}) {
		t.Fatalf("the flow after a restart: %v", got)
	}
}
