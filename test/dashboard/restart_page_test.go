package dashboard

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// restartButtonJS evaluates to the sidebar's "Restart Core" button, which
// asks for a confirmation, POSTs /restart and reloads the page once the
// answer is ok.
const restartButtonJS = `[...document.querySelectorAll('button[title="Restart Core"]')].find(b => b.offsetParent !== null)`

// restartCore: (f) "Restart Core", clicked on the proxies page and
// confirmed, restarts the process in place (a second "switchyard ready"
// on the same stderr, the process never having exited), and the page,
// reloaded by metacubexd, connects again and shows the choices made in the
// page before, read back from the store: pick on node-b, GLOBAL on node-a.
func restartCore(t *testing.T, b *browser, p *proc, api string) {
	b.do("opening the proxies page", chromedp.Navigate(api+"/ui/#/proxies"))
	b.waitFor("the sidebar's Restart Core button", func() (bool, string) {
		var found bool
		return b.eval(`!!`+restartButtonJS, &found) == nil && found, b.text()
	})
	// A mark in the page's state tells the page metacubexd reloads from
	// the one the click was made on.
	b.do("clicking Restart Core",
		chromedp.Evaluate[chromedp.Void](`window.beforeRestart = true`),
		chromedp.Click(chromedp.JSPath(restartButtonJS)))
	p.waitLogN("switchyard ready", 2, waitStep)
	select {
	case err := <-p.done:
		t.Fatalf("switchyard exited (%v) instead of restarting in place:\n%s", err, p.logs)
	default:
	}
	b.waitFor("metacubexd to reload the page after the restart", func() (bool, string) {
		var mark bool
		return b.eval(`!!window.beforeRestart`, &mark) == nil && !mark, "the page was not reloaded"
	})
	b.openGroup("pick", "node-a", "node-b", "auto")
	b.waitFor("pick on node-b and GLOBAL on node-a after the restart", func() (bool, string) {
		pick, global := b.groupCard("pick"), b.groupCard("GLOBAL")
		return strings.Contains(pick.Header, "node-b") && strings.Contains(global.Header, "node-a"),
			pick.String() + "\n" + global.String()
	})
	if m := b.shownMode(); m != "Rule" {
		t.Fatalf("the sidebar shows the running mode %q after the restart, want Rule", m)
	}
	b.shot("restarted")
}
