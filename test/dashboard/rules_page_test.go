package dashboard

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchyard/test/socksclient"
)

// What metacubexd renders on its rules page, read from the DOM of the
// built copy under testdata: a card per rule titled by its payload (else
// its type), holding an on/off checkbox (input.toggle, checked while the
// rule is on: GET /rules' extra.disabled), the type, "->", the proxy and
// the hit count (extra.hitCount) in the span after it. A change of the
// checkbox PATCHes /rules/disable {"<index>": <off>}.

// ruleCardJS evaluates to the card of the rule titled title, or null.
func ruleCardJS(title string) string {
	q, _ := json.Marshal(title)
	return fmt.Sprintf(`(() => {
		const t = [...document.querySelectorAll('div')].find(d => d.children.length === 0 && d.textContent.trim() === %s);
		let c = t;
		while (c && !c.querySelector('input.toggle')) c = c.parentElement;
		return c || null;
	})()`, q)
}

// ruleCard is what a rule's card shows.
type ruleCard struct {
	Found bool   `json:"found"`
	On    bool   `json:"on"`
	Proxy string `json:"proxy"`
	Hits  string `json:"hits"`
	Text  string `json:"text"`
}

func (b *browser) ruleCard(title, proxy string) ruleCard {
	var c ruleCard
	q, _ := json.Marshal(proxy)
	if err := b.eval(`(() => {
		const card = `+ruleCardJS(title)+`;
		if (!card) return {found: false};
		const proxy = [...card.querySelectorAll('span')].find(s => s.textContent.trim() === `+string(q)+`);
		return {
			found: true,
			on: card.querySelector('input.toggle').checked,
			proxy: proxy ? proxy.textContent.trim() : '',
			hits: proxy && proxy.nextElementSibling ? proxy.nextElementSibling.textContent.trim() : '',
			text: card.innerText,
		};
	})()`, &c); err != nil {
		c.Text = "(" + err.Error() + ")"
	}
	return c
}

// ruleState is rule index i as GET /rules reports it.
func ruleState(t *testing.T, api string, i int) (disabled bool, hits uint64) {
	t.Helper()
	var got struct {
		Rules []struct {
			Index int `json:"index"`
			Extra struct {
				Disabled bool   `json:"disabled"`
				Hits     uint64 `json:"hitCount"`
			} `json:"extra"`
		} `json:"rules"`
	}
	apiGet(t, api+"/rules", &got)
	for _, r := range got.Rules {
		if r.Index == i {
			return r.Extra.Disabled, r.Extra.Hits
		}
	}
	t.Fatalf("no rule of index %d in GET /rules: %+v", i, got)
	return false, 0
}

// rulesPage: (g) the rules page lists the port rule to node-a with the
// hit of a flow it routed, then the final as Match to pick; the rule's
// switch, turned off in the page, makes GET /rules report it off and the
// next flow to its port go by the final (pick, on node-b); turned on
// again, the rule routes again.
func rulesPage(t *testing.T, b *browser, p *proc, api string, rulePort int) {
	title := strconv.Itoa(rulePort)
	// through opens a flow to rulePort, checks its chain and closes it,
	// waiting until the connections list has forgotten it.
	through := func(want ...string) {
		t.Helper()
		c, err := socksclient.DialWithin(p.addr("socks-in"), "127.0.0.1:"+title, "", "", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		echoes(t, c)
		got := chainTo(t, api, rulePort)
		c.Close()
		if !slices.Equal(got, want) {
			t.Fatalf("a flow to the rule's port: chains %v, want %v", got, want)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var cs conns
			apiGet(t, api+"/connections", &cs)
			if !slices.ContainsFunc(cs.Connections, func(x connJSON) bool { return x.Metadata.DestinationPort == title }) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the flow to %d is still listed after its close", rulePort)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	through("node-a")

	b.do("opening the rules page", chromedp.Navigate(api+"/ui/#/rules"))
	b.waitText("the final on the rules page", "Match", "pick")
	b.waitFor("the port rule's card, on, with its hit", func() (bool, string) {
		c := b.ruleCard(title, "node-a")
		return c.Found && c.On && c.Proxy == "node-a" && c.Hits == "1", fmt.Sprintf("%+v", c)
	})
	b.shot("rules")

	toggle := func(on bool) {
		t.Helper()
		b.do("clicking the port rule's switch", chromedp.Click(chromedp.JSPath(ruleCardJS(title)+`.querySelector('input.toggle')`)))
		b.waitFor(fmt.Sprintf("the port rule's switch to show on=%v", on), func() (bool, string) {
			c := b.ruleCard(title, "node-a")
			return c.Found && c.On == on, fmt.Sprintf("%+v", c)
		})
		// The page shows the switch before its PATCH is answered: the API
		// follows within the step's bound.
		for deadline := time.Now().Add(waitStep); ; time.Sleep(20 * time.Millisecond) {
			off, _ := ruleState(t, api, 0)
			if off != on {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /rules: rule 0 disabled=%v %v after the switch was turned on=%v in the page", off, waitStep, on)
			}
		}
	}
	toggle(false)
	b.shot("rules-off")
	through("node-b", "pick")
	toggle(true)
	through("node-a")
	if _, hits := ruleState(t, api, 0); hits != 2 {
		t.Fatalf("GET /rules: rule 0 routed %d flows, want 2 (none while it was off)", hits)
	}
}
