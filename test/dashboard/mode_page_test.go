package dashboard

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/test/socksclient"
)

// What metacubexd renders for the running mode, read from the DOM of the
// built copy under testdata: the sidebar's mode button, titled "Running
// Mode: <Mode>", opens a menu of role=menuitem buttons, one per entry of
// GET /configs' mode-list; a click on one PATCHes /configs {"mode": ...}.

// modeButtonJS evaluates to the sidebar's running-mode button.
const modeButtonJS = `[...document.querySelectorAll('button[title^="Running Mode:"]')].find(b => b.offsetParent !== null)`

// modeItemJS evaluates to the mode menu's entry labelled label.
func modeItemJS(label string) string {
	q, _ := json.Marshal(label)
	return `[...document.querySelectorAll('[role=menuitem]')].find(b => b.innerText.trim() === ` + string(q) + `)`
}

// shownMode is the mode the sidebar's button says is running.
func (b *browser) shownMode() string {
	var title string
	if err := b.eval(`(`+modeButtonJS+` || {title: ''}).title`, &title); err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimPrefix(title, "Running Mode: ")
}

// switchMode picks label (Rule, Global, Direct) in the sidebar's mode menu
// and waits until the page and GET /configs both say the mode is label.
func (b *browser) switchMode(api, label string) {
	b.t.Helper()
	b.waitFor("the sidebar's running-mode button", func() (bool, string) {
		return b.shownMode() != "", b.text()
	})
	b.do("opening the running-mode menu", chromedp.Click(chromedp.JSPath(modeButtonJS)))
	b.waitFor("the "+label+" entry of the running-mode menu", func() (bool, string) {
		var found bool
		return b.eval(`!!`+modeItemJS(label), &found) == nil && found, b.text()
	})
	b.do("choosing "+label+" in the running-mode menu", chromedp.Click(chromedp.JSPath(modeItemJS(label))))
	b.waitFor("the sidebar to show the running mode "+label, func() (bool, string) {
		m := b.shownMode()
		return m == label, "shown: " + m
	})
	// The page shows the choice at once, before its PATCH is answered.
	b.waitFor("GET /configs to report the mode "+label+" chosen in the page", func() (bool, string) {
		var cfg struct {
			Mode string `json:"mode"`
		}
		apiGet(b.t, api+"/configs", &cfg)
		return cfg.Mode == strings.ToLower(label), "mode: " + cfg.Mode
	})
	b.waitFor("the page to keep showing "+label+" (a refused PATCH reverts it)", func() (bool, string) {
		return b.shownMode() == label, "shown: " + b.shownMode()
	})
}

// conns are the open flows as GET /connections lists them.
type conns struct {
	Connections []connJSON `json:"connections"`
}

type connJSON struct {
	Chains   []string `json:"chains"`
	Rule     string   `json:"rule"`
	Metadata struct {
		InboundName     string `json:"inboundName"`
		DestinationPort string `json:"destinationPort"`
	} `json:"metadata"`
}

// chainTo is the chain (leaf first) of the flow from socks-in to port.
func chainTo(t *testing.T, api string, port int) []string {
	t.Helper()
	var c conns
	apiGet(t, api+"/connections", &c)
	for _, x := range c.Connections {
		if x.Metadata.InboundName == "socks-in" && x.Metadata.DestinationPort == strconv.Itoa(port) {
			return x.Chains
		}
	}
	t.Fatalf("no flow from socks-in to port %d in GET /connections: %+v", port, c)
	return nil
}

// modePage: (e) the running mode is switched from the sidebar's menu: to
// global, where GLOBAL's member is chosen on the proxies page and the next
// flow goes through GLOBAL to it, as the connections page shows; to
// direct, where the next flow goes direct; back to rule, where it goes
// through pick again. Each flow goes to an echo server of its own, so that
// its row is told from the others.
func modePage(t *testing.T, b *browser, p *proc, api string) {
	flow := func(port int) net.Conn {
		t.Helper()
		c, err := socksclient.DialWithin(p.addr("socks-in"), "127.0.0.1:"+strconv.Itoa(port), "", "", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		echoes(t, c)
		return c
	}
	// rowJS finds the row of the flow to port whose text holds every one
	// of want.
	rowJS := func(port int, want ...string) string {
		conds := []string{`r.innerText.includes(':` + strconv.Itoa(port) + `')`}
		for _, w := range want {
			q, _ := json.Marshal(w)
			conds = append(conds, `r.innerText.includes(`+string(q)+`)`)
		}
		return `[...document.querySelectorAll('tr')].find(r => ` + strings.Join(conds, " && ") + `)`
	}
	rowText := func(port int, want ...string) (string, bool) {
		var s *string
		if b.eval(`(`+rowJS(port, want...)+` || {innerText: null}).innerText`, &s) != nil || s == nil {
			return "", false
		}
		return *s, true
	}
	rows := func() string {
		var rows []string
		b.eval(`[...document.querySelectorAll('tr')].map(r => r.innerText)`, &rows)
		return strings.Join(rows, "\n")
	}

	b.do("opening the proxies page", chromedp.Navigate(api+"/ui/#/proxies"))
	if m := b.shownMode(); m != "Rule" {
		b.waitFor("the sidebar to show the running mode Rule", func() (bool, string) { return b.shownMode() == "Rule", b.shownMode() })
	}
	b.switchMode(api, "Global")

	// GLOBAL's members are every group and outbound; its choice starts on
	// the final (pick, now on node-b) and is moved to node-a in the page.
	var global struct {
		Now string   `json:"now"`
		All []string `json:"all"`
	}
	apiGet(t, api+"/proxies/GLOBAL", &global)
	if global.Now != "pick" || !slices.Contains(global.All, "node-a") {
		t.Fatalf("GET /proxies/GLOBAL: %+v, want pick chosen and node-a among the members", global)
	}
	b.openGroup("GLOBAL", global.All...)
	b.do("clicking node-a in GLOBAL",
		chromedp.Click(chromedp.JSPath(groupCardJS("GLOBAL")+`.querySelector('[role=button][aria-label="node-a"] h2')`)))
	b.waitFor("GLOBAL's choice to show node-a", func() (bool, string) {
		c := b.groupCard("GLOBAL")
		m, _ := c.member("node-a")
		return m.Selected && strings.Contains(c.Header, "node-a"), c.String()
	})
	apiGet(t, api+"/proxies/GLOBAL", &global)
	if global.Now != "node-a" {
		t.Fatalf("GET /proxies/GLOBAL: now = %q after the click on node-a", global.Now)
	}
	b.shot("mode-global")

	globalPort, directPort, rulePort := echoServer(t), echoServer(t), echoServer(t)
	flow(globalPort)
	if got := chainTo(t, api, globalPort); !slices.Equal(got, []string{"node-a", "GLOBAL"}) {
		t.Fatalf("a flow in global mode: chains %v, want [node-a GLOBAL]", got)
	}
	b.do("opening the connections page", chromedp.Navigate(api+"/ui/#/connections"))
	b.waitFor("the global-mode flow's row, through GLOBAL to node-a", func() (bool, string) {
		_, ok := rowText(globalPort, "GLOBAL", "node-a")
		return ok, rows()
	})
	b.shot("connections-global")

	b.switchMode(api, "Direct")
	flow(directPort)
	if got := chainTo(t, api, directPort); !slices.Equal(got, []string{"direct"}) {
		t.Fatalf("a flow in direct mode: chains %v, want [direct]", got)
	}
	b.waitFor("the direct-mode flow's row, direct and through no group", func() (bool, string) {
		row, ok := rowText(directPort, "direct")
		return ok && !strings.Contains(row, "GLOBAL") && !strings.Contains(row, "pick") && !strings.Contains(row, "node-"), rows()
	})
	b.shot("connections-direct")

	b.switchMode(api, "Rule")
	flow(rulePort)
	if got := chainTo(t, api, rulePort); !slices.Equal(got, []string{"node-b", "pick"}) {
		t.Fatalf("a flow in rule mode again: chains %v, want [node-b pick]", got)
	}
	b.waitFor("the rule-mode flow's row, through pick to node-b", func() (bool, string) {
		_, ok := rowText(rulePort, "pick", "node-b")
		return ok, rows()
	})
	b.shot("connections-rule")
}
