package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/test/socksclient"
)

const secret = "dash-s3cret"

// config is a switchyard with the API (and metacubexd at /ui/) on apiPort,
// a SOCKS inbound whose flows go to the selector "pick", and two SOCKS
// nodes on loopback: the inbounds up-a and up-b of a second switchyard
// (upstream), whose flows go direct. The nodes are in a process of their
// own so that whatever the first one's mode routes (global mode routes
// every flow, as mihomo's does), the nodes' flows leave it. "auto" is a
// URLTest group over both; health probes fetch probeURL through each node.
// Flows to rulePort go to node-a by a rule.
func config(apiPort, upA, upB, rulePort int, probeURL, ui, state string) string {
	return fmt.Sprintf(`
[log]
level = "debug"

[api]
listen = "127.0.0.1:%d"
secret = %q
external_ui = %q

[state]
path = %q

[health]
tcp_check_url = [%q]
tcp_check_method = "GET"
udp_check_dns = []
check_interval = "1h"
check_timeout = "5s"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "node-a"
type = "socks"
server = "127.0.0.1:%d"

[[outbounds]]
tag = "node-b"
type = "socks"
server = "127.0.0.1:%d"

[[groups]]
tag = "pick"
policy = "selector"
members = ["node-a", "node-b", "auto"]
default = "node-a"

[[groups]]
tag = "auto"
policy = "urltest"
members = ["node-a", "node-b"]

[route]
final = "pick"

[[rules]]
port = [%d]
outbound = "node-a"
`, apiPort, secret, ui, state, probeURL, upA, upB, rulePort)
}

// upstream is the switchyard the nodes of config lead to: two SOCKS
// inbounds whose flows go direct.
func upstream(upA, upB int) string {
	return fmt.Sprintf(`
[state]
path = ""

[[inbounds]]
tag = "up-a"
type = "socks"
listen = "127.0.0.1:%d"

[[inbounds]]
tag = "up-b"
type = "socks"
listen = "127.0.0.1:%d"

[route]
final = "direct"
`, upA, upB)
}

// probeServer answers the health probes and delay tests with 204 after a
// delay the test sets, so that the delays a delay test measures can be
// told from the ones the startup probes left.
type probeServer struct {
	*httptest.Server
	delay atomic.Int64 // nanoseconds
}

func newProbeServer(t *testing.T) *probeServer {
	p := &probeServer{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Duration(p.delay.Load())):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(p.Close)
	return p
}

// echoServer is a TCP echo server on loopback; it returns its port. Each
// connection's goroutine ends when its client closes.
func echoServer(t *testing.T) int {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func apiGet(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// The built metacubexd, served by switchyard at /ui/ and driven in headless
// Chromium as a user would: it connects with the secret, lists the groups
// and their members, shows the delays of a delay test started from the
// page, switches the selector on a click, lists a live flow, switches the
// running mode and GLOBAL's choice (the next flows' rows following them),
// shows the process's log lines, the rules and the data usage, and
// restarts the core, after which it connects again. Everything is
// asserted from the rendered page, and every API request the page makes
// must be answered (requireAnswered).
func TestMetacubexd(t *testing.T) {
	ui, err := filepath.Abs(filepath.Join("testdata", "metacubexd"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ui, "index.html")); err != nil {
		t.Fatalf("the built metacubexd is missing: %v", err)
	}
	probe := newProbeServer(t)
	echoPort := echoServer(t)
	apiPort := freeLoopbackPort(t)
	for "http://127.0.0.1:"+strconv.Itoa(apiPort) == defaultBackend {
		apiPort = freeLoopbackPort(t)
	}
	upA, upB := freeLoopbackPort(t), freeLoopbackPort(t)
	start(t, upstream(upA, upB))
	rulePort := echoServer(t)
	p := start(t, config(apiPort, upA, upB, rulePort, probe.URL+"/generate_204", ui, filepath.Join(t.TempDir(), "state.db")))
	api := "http://127.0.0.1:" + strconv.Itoa(apiPort)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	b := newBrowser(t, ctx, api)

	// Setup: the page first probes its default backend (blocked, see
	// newBrowser) and says it found none; then the user types the API's
	// address and secret.
	b.do("opening the dashboard", chromedp.Navigate(api+"/ui/"))
	b.waitText("the setup form, after its probe of the default backend", "Endpoint URL", "No backend detected")
	b.do("filling the setup form",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#url').select()`),
		chromedp.SendKeys(chromedp.CSS("#url"), api),
		chromedp.SendKeys(chromedp.CSS("#secret"), secret),
		chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
	)
	b.waitText("the overview, connected", "Connected to:", api)
	b.shot("overview")

	proxiesPage(t, b, probe, api)
	connectionsPage(t, b, p, api, echoPort)
	modePage(t, b, p, api)
	logsPage(t, b, p, api)
	rulesPage(t, b, p, api, rulePort)
	otherPages(b, api)
	restartCore(t, b, p, api)
	b.requireAnswered()
}

// proxiesPage: (a) the groups and their members are listed, and a delay
// test started from the page shows its delays; (b) a click on a member of
// the selector switches it, in the page and in GET /proxies/pick.
func proxiesPage(t *testing.T, b *browser, probe *probeServer, api string) {
	b.do("opening the proxies page", chromedp.Navigate(api+"/ui/#/proxies"))
	b.openGroup("pick", "node-a", "node-b", "auto")
	b.openGroup("auto", "node-a", "node-b")
	if c := b.groupCard("pick"); !strings.Contains(c.Header, "Selector") || !strings.Contains(c.Header, "node-a") {
		t.Fatalf("pick: want a Selector on node-a: %s", c)
	}
	if c := b.groupCard("auto"); !strings.Contains(strings.ToLower(c.Header), "urltest") {
		t.Fatalf("auto: want a URLTest group: %s", c)
	}
	if c := b.groupCard("GLOBAL"); !c.Found {
		t.Fatalf("no GLOBAL group on the page:\n%s", b.text())
	}

	// The startup probes left delays of a few ms; from each test on, the
	// probe target answers late (300 ms, then 600 ms), so only a delay test
	// run from the page shows that much.
	delayTest := func(group string, min time.Duration, members ...string) {
		t.Helper()
		probe.delay.Store(int64(min))
		b.do("clicking the latency test of "+group, chromedp.Click(chromedp.JSPath(latencyButtonJS(group))))
		b.waitFor(fmt.Sprintf("delays of at least %v for the members of %s", min, group), func() (bool, string) {
			c := b.groupCard(group)
			for _, name := range members {
				m, _ := c.member(name)
				if ms, ok := m.latencyMS(); !ok || ms < int(min/time.Millisecond) {
					return false, c.String()
				}
			}
			return true, ""
		})
		t.Logf("%s after its delay test: %s", group, b.groupCard(group))
	}
	delayTest("pick", 300*time.Millisecond, "node-a", "node-b")
	delayTest("auto", 600*time.Millisecond, "node-a", "node-b")
	probe.delay.Store(0)
	b.shot("proxies")

	b.do("clicking node-b in pick",
		chromedp.Click(chromedp.JSPath(groupCardJS("pick")+`.querySelector('[role=button][aria-label="node-b"] h2')`)))
	b.waitFor("pick's choice to show node-b", func() (bool, string) {
		c := b.groupCard("pick")
		m, _ := c.member("node-b")
		return m.Selected && strings.Contains(c.Header, "node-b") && !strings.Contains(c.Header, "node-a"), c.String()
	})
	var pick struct {
		Now string `json:"now"`
	}
	apiGet(t, api+"/proxies/pick", &pick)
	if pick.Now != "node-b" {
		t.Fatalf("GET /proxies/pick: now = %q after the click on node-b, want node-b", pick.Now)
	}
	b.shot("proxies-switched")
}

// connectionsPage: (c) a flow held open through the SOCKS inbound (opened
// after the switch, which interrupts node-a's flows) is listed in a row
// with its host and its chain through the selector to node-b; the row's
// close button ends exactly that flow.
func connectionsPage(t *testing.T, b *browser, p *proc, api string, echoPort int) {
	// flow opens a flow through the SOCKS inbound to the echo server and
	// checks that it carries data.
	flow := func(target string) net.Conn {
		t.Helper()
		c, err := socksclient.DialWithin(p.addr("socks-in"), target, "", "", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		echoes(t, c)
		return c
	}
	target := "localhost:" + strconv.Itoa(echoPort)
	other := "127.0.0.1:" + strconv.Itoa(echoPort)
	c, keep := flow(target), flow(other)

	b.do("opening the connections page", chromedp.Navigate(api+"/ui/#/connections"))
	// rowJS finds the row of the flow to host through pick and node-b.
	rowJS := func(host string) string {
		q, _ := json.Marshal(host)
		return `[...document.querySelectorAll('tr')].find(r => r.innerText.includes(` + string(q) +
			`) && r.innerText.includes('pick') && r.innerText.includes('node-b'))`
	}
	rows := func() string {
		var rows []string
		b.eval(`[...document.querySelectorAll('tr')].map(r => r.innerText)`, &rows)
		return strings.Join(rows, "\n")
	}
	shown := func(host string) bool {
		var found bool
		return b.eval(`!!`+rowJS(host), &found) == nil && found
	}
	b.waitFor("the live flows' rows on the connections page", func() (bool, string) {
		return shown(target) && shown(other), rows()
	})
	b.shot("connections")

	b.do("clicking the close button of the flow's row", chromedp.Click(chromedp.JSPath(rowJS(target)+`.querySelector('button')`)))
	c.SetDeadline(time.Now().Add(waitStep))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the flow still carries data (%d bytes) after its close button was clicked", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the flow is still open %v after its close button was clicked", waitStep)
	}
	echoes(t, keep)
	// metacubexd skips snapshots with no connection at all; the other
	// flow keeps the list non-empty, so the page shows the close.
	b.waitFor("the closed flow's row to leave the connections page, the other's to stay", func() (bool, string) {
		return !shown(target) && shown(other), rows()
	})
	b.shot("connections-closed")
}

// echoes checks that c, a flow to the echo server, carries data.
func echoes(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatalf("no echo through the flow: %v", err)
	}
}

// logsPage: (d) the logs page shows the line the switch made in the page
// logged (the dashboard streams /logs from the moment it connects), and
// the lines of a reload started from the config page's "Reload Config"
// (PUT /configs with neither a path nor a payload: the running file).
func logsPage(t *testing.T, b *browser, p *proc, api string) {
	b.do("opening the config page", chromedp.Navigate(api+"/ui/#/config"))
	reloadJS := `[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Reload Config')`
	b.waitFor("the config page's Reload Config button", func() (bool, string) {
		var found bool
		return b.eval(`!!`+reloadJS, &found) == nil && found, b.text()
	})
	b.do("clicking Reload Config", chromedp.Click(chromedp.JSPath(reloadJS)))
	p.waitLog("reload applied", 5*time.Second)
	b.shot("config")

	b.do("opening the logs page", chromedp.Navigate(api+"/ui/#/logs"))
	b.waitText("the selector switch's and the reload's log lines on the logs page",
		"selector choice changed", "member=node-b", "reloading the configuration", "reload applied")
	b.shot("logs")
}

// otherPages: (h) the data-usage page renders; what it asks of the API
// is answered (see requireAnswered).
func otherPages(b *browser, api string) {
	b.do("opening the data-usage page", chromedp.Navigate(api+"/ui/#/traffic"))
	b.waitText("the data-usage page", "Time Range", "Data Retention", "TRAFFIC")
	b.shot("traffic")
}
