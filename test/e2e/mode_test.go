package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// PATCH /configs mode=global moves the next SOCKS flow to the GLOBAL
// selector's choice, mode=direct to direct, leaving the flows already
// open where they are; the mode and the GLOBAL choice survive a restart
// on the same state file.
func TestModeMovesTheNextFlow(t *testing.T) {
	apiPort := freeLoopbackPort(t)
	state := filepath.Join(t.TempDir(), "state.db")
	cfg := fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[state]
path = %q

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "d1"
type = "direct"

[[outbounds]]
tag = "d2"
type = "direct"

[[groups]]
tag = "pick"
policy = "selector"
members = ["d1", "d2"]

[route]
final = "pick"
`, apiPort, state)
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	echo := echoServer(t)

	p := start(t, cfg)
	waitAPI(t, base)
	rule := openFlow(t, p, echo)
	if got := onlyChain(t, base); !slices.Equal(got, []string{"d1", "pick"}) {
		t.Fatalf("rule mode: chain %v", got)
	}
	mustCall(t, http.MethodPut, base+"/proxies/GLOBAL", `{"name":"d2"}`)
	mustCall(t, http.MethodPatch, base+"/configs", `{"mode":"global"}`)
	if m := mode(t, base); m != "global" {
		t.Fatalf("GET /configs mode %q", m)
	}
	global := openFlow(t, p, echo)
	chains := allChains(t, base)
	if !slices.ContainsFunc(chains, func(c []string) bool { return slices.Equal(c, []string{"d2", "GLOBAL"}) }) ||
		!slices.ContainsFunc(chains, func(c []string) bool { return slices.Equal(c, []string{"d1", "pick"}) }) {
		t.Fatalf("global mode: chains %v, want the new flow on GLOBAL -> d2 and the old one still on pick", chains)
	}
	mustCall(t, http.MethodPatch, base+"/configs", `{"mode":"direct"}`)
	direct := openFlow(t, p, echo)
	if chains := allChains(t, base); len(chains) != 3 ||
		!slices.ContainsFunc(chains, func(c []string) bool { return slices.Equal(c, []string{"direct"}) }) {
		t.Fatalf("direct mode: chains %v", chains)
	}
	for _, c := range []net.Conn{rule, global, direct} {
		echoes(t, c) // no mode change cut a flow
		c.Close()
	}
	code, body := apiCall(t, http.MethodPatch, base+"/configs", `{"mode":"script"}`)
	if code != http.StatusBadRequest || !json.Valid([]byte(body)) {
		t.Fatalf("an unknown mode: %d %s", code, body)
	}
	mustCall(t, http.MethodPatch, base+"/configs", `{"mode":"global"}`)
	p.stop()

	p = start(t, cfg)
	waitAPI(t, base)
	if m := mode(t, base); m != "global" {
		t.Fatalf("mode after a restart: %q", m)
	}
	c := openFlow(t, p, echo)
	defer c.Close()
	if got := onlyChain(t, base); !slices.Equal(got, []string{"d2", "GLOBAL"}) {
		t.Fatalf("after a restart: chain %v", got)
	}
}

func waitAPI(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/version", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustCall(t *testing.T, method, url, body string) {
	t.Helper()
	if code, b := apiCall(t, method, url, body); code != http.StatusNoContent {
		t.Fatalf("%s %s %s: %d %s", method, url, body, code, b)
	}
}

func mode(t *testing.T, base string) string {
	t.Helper()
	code, body := apiCall(t, http.MethodGet, base+"/configs", "")
	var c struct {
		Mode string `json:"mode"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("GET /configs: %d %s", code, body)
	}
	return c.Mode
}

// openFlow opens a SOCKS flow to the echo server and checks it echoes.
func openFlow(t *testing.T, p *proc, echo string) net.Conn {
	t.Helper()
	c, err := socksclient.DialWithin(p.addr("socks-in"), echo, "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	echoes(t, c)
	return c
}

func echoes(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q %v", b, err)
	}
}

// allChains are the chains of the open connections, as GET /connections
// shows them (leaf first).
func allChains(t *testing.T, base string) [][]string {
	t.Helper()
	code, body := apiCall(t, http.MethodGet, base+"/connections", "")
	var c struct {
		Connections []struct {
			Chains []string `json:"chains"`
		} `json:"connections"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("GET /connections: %d %s", code, body)
	}
	var out [][]string
	for _, x := range c.Connections {
		out = append(out, x.Chains)
	}
	return out
}

func onlyChain(t *testing.T, base string) []string {
	t.Helper()
	chains := allChains(t, base)
	if len(chains) != 1 {
		t.Fatalf("connections: %v, want one", chains)
	}
	return chains[0]
}
