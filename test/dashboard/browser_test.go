package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// waitStep bounds every wait on the page.
const waitStep = 20 * time.Second

// defaultBackend is the address metacubexd's setup page tries by itself.
const defaultBackend = "http://127.0.0.1:9090"

// chromiumPath is Debian's chromium (scripts/test.sh installs it). Its
// absence fails the test: the browser test is not optional.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Fatal("chromium is not installed (scripts/test.sh installs it: apt-get install chromium)")
	return ""
}

// artifacts is the folder the screenshots go to: dashboard/ under
// $SWITCHYARD_TEST_ARTIFACTS, else under out/ beside the test (ignored by
// git). The pictures of an earlier run are removed.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWITCHYARD_TEST_ARTIFACTS")
	if dir == "" {
		dir = "out"
	}
	dir, err := filepath.Abs(filepath.Join(dir, "dashboard"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one headless Chromium tab, with the page's console errors,
// uncaught exceptions and the API's answers to it kept for the failure
// report.
type browser struct {
	t   *testing.T
	ctx context.Context
	out string

	mu      sync.Mutex
	events  []string
	methods map[network.RequestID]string // the API requests' methods
	refused []string                     // "METHOD path: status" of every API answer >= 400
}

func newBrowser(t *testing.T, ctx context.Context, api string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: bctx, out: artifacts(t), methods: map[network.RequestID]string{}}
	if err := chromedp.Listen(bctx, b.note(api)); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	// The page's confirmations (window.confirm, before "Restart Core")
	// are accepted, as the user who clicked means them; each is noted.
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.events = append(b.events, "dialog accepted: "+ev.Message)
			b.mu.Unlock()
			chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		<-accepted
	})
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	// Before the user types an address, the setup page probes a default
	// backend on 127.0.0.1:9090 and connects to it when it answers without
	// a secret. Whatever else runs on this machine, the page must not find
	// one there.
	if _, err := chromedp.Call(bctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
		URLPatterns: []*network.BlockPattern{{URLPattern: defaultBackend + "/*", Block: true}},
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			t.Logf("page events:\n%s", strings.Join(b.events, "\n"))
			b.mu.Unlock()
		}
	})
	return b
}

// note records what a failure report needs: the page's errors and every
// answer of the API (not the dashboard's own files).
func (b *browser) note(api string) func(ev any) {
	return func(ev any) {
		var line string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeWarning {
				return
			}
			line = "console." + string(e.Type)
			for _, a := range e.Args {
				line += " " + string(a.Value) + a.Description
			}
		case *runtime.EventExceptionThrown:
			line = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				line += " " + e.ExceptionDetails.Exception.Description
			}
		case *network.EventRequestWillBeSent:
			if strings.HasPrefix(e.Request.URL, api) {
				b.mu.Lock()
				b.methods[e.RequestID] = e.Request.Method
				b.mu.Unlock()
			}
			return
		case *network.EventResponseReceived:
			if !strings.HasPrefix(e.Response.URL, api) || strings.HasPrefix(e.Response.URL, api+"/ui/") {
				return
			}
			b.mu.Lock()
			method := b.methods[e.RequestID]
			delete(b.methods, e.RequestID)
			if e.Response.Status >= 400 {
				path := strings.TrimPrefix(e.Response.URL, api)
				if i := strings.IndexByte(path, '?'); i >= 0 {
					path = path[:i]
				}
				b.refused = append(b.refused, fmt.Sprintf("%s %s: %d", method, path, e.Response.Status))
			}
			b.mu.Unlock()
			line = fmt.Sprintf("%d %s %s", e.Response.Status, method, e.Response.URL)
		case *network.EventLoadingFailed:
			if e.BlockedReason != "" {
				line = "blocked (" + string(e.BlockedReason) + ")"
			} else {
				return
			}
		case *network.EventWebSocketCreated:
			line = "websocket " + e.URL
		default:
			return
		}
		b.mu.Lock()
		b.events = append(b.events, line)
		b.mu.Unlock()
	}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitStep)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed")
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page into v.
func (b *browser) eval(expr string, v any) error {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(`+expr+`)`))
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(s), v)
}

// text is the rendered text of the page.
func (b *browser) text() string {
	var s string
	if err := b.eval(`document.body.innerText`, &s); err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// waitFor polls cond (every 200 ms, waitStep at most) until it holds; on
// timeout it saves a screenshot and fails with what cond last saw.
func (b *browser) waitFor(what string, cond func() (bool, string)) {
	b.t.Helper()
	deadline := time.Now().Add(waitStep)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.shot("failed")
			b.t.Fatalf("%s: not after %v; last seen:\n%s", what, waitStep, seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitText waits until the page's rendered text contains every one of want.
func (b *browser) waitText(what string, want ...string) {
	b.t.Helper()
	b.waitFor(what, func() (bool, string) {
		text := b.text()
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false, fmt.Sprintf("(no %q)\n%s", w, text)
			}
		}
		return true, ""
	})
}

// settleJS turns the page's animations and transitions off. The cards of
// metacubexd fade in each time they render, and headless Chromium, which
// draws frames only now and then, would capture them half transparent.
const settleJS = `(() => {
	if (!document.getElementById('test-settle')) {
		const s = document.createElement('style');
		s.id = 'test-settle';
		s.textContent = '*, *::before, *::after { animation: none !important; transition: none !important; }';
		document.head.appendChild(s);
	}
	return true;
})()`

// shot saves a full-page PNG screenshot named name, its animations off
// (settleJS) so that it shows the page as it settles.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](settleJS))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.out, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", path)
}

// unanswered are the API requests of the page that switchyard refuses on
// purpose: metacubexd's probe of its own companion service.
var unanswered = map[string]bool{
	"GET /api/control/info: 404": true,
}

// requireAnswered fails the test if the page was refused (a status of 400
// or more) any API request but those in unanswered: whatever the pages
// visited ask for, switchyard answers.
func (b *browser) requireAnswered() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var refused []string
	for _, r := range b.refused {
		if !unanswered[r] {
			refused = append(refused, r)
		}
	}
	if len(refused) > 0 {
		b.t.Errorf("the page's API requests refused:\n%s", strings.Join(refused, "\n"))
	}
}
