package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// flowEchoes opens a flow through proxy to dst and reports whether it
// echoes.
func flowEchoes(proxy, dst string) error {
	c, err := socksclient.DialWithin(proxy, dst, "", "", 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 4))
	return err
}

// A download that fails at start leaves the provider on its cached copy:
// the process serves through the cached nodes and retries on its backoff.
func TestAFailedDownloadAtStartUsesTheCache(t *testing.T) {
	dir := t.TempDir()
	upPort := freeLoopbackPort(t)
	dead := freeLoopbackPort(t) // nothing listens: the download is refused
	cache := filepath.Join(dir, "sub-cache.txt")
	if err := os.WriteFile(cache, []byte(fmt.Sprintf("socks5://127.0.0.1:%d#Cached\n", upPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Older than the interval: the process downloads at once.
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(cache, old, old); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "up"
type = "socks"
listen = "127.0.0.1:%d"

[[providers]]
tag = "sub"
url = "http://127.0.0.1:%d/sub"
path = %q

[[groups]]
tag = "subs"
policy = "selector"
use = ["sub"]

[[rules]]
inbound = ["socks-in"]
outbound = "subs"
`, upPort, dead, cache)
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startArgs(t, "run", "-c", path)
	defer p.stop()
	p.waitLog("provider sub: the download failed; retrying in 10s", 1, 10*time.Second)
	if err := flowEchoes(p.addr("socks-in"), echoServer(t)); err != nil {
		t.Fatalf("no flow through the cached node: %v\n%s", err, p.logs.String())
	}
	if b, _ := os.ReadFile(cache); !strings.Contains(string(b), "#Cached") {
		t.Fatalf("the cache changed: %q", b)
	}
}

// feed serves a subscription and a rule set; the rule set's first
// answer waits for release.
type feed struct {
	*httptest.Server
	mu      sync.Mutex
	sub     string
	release chan struct{}
	subs    int // full subscription bodies sent
}

func newFeed(t *testing.T) *feed {
	f := &feed{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sub":
			f.mu.Lock()
			body := f.sub
			f.mu.Unlock()
			etag := fmt.Sprintf(`"%x"`, len(body)*7919+strings.Count(body, "1"))
			w.Header().Set("ETag", etag)
			w.Header().Set("Subscription-Userinfo", "upload=5; download=6; total=1000; expire=1900000000")
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			f.mu.Lock()
			f.subs++
			f.mu.Unlock()
			io.WriteString(w, body)
		case "/block.txt":
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "127.0.0.0/8\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *feed) set(sub string) {
	f.mu.Lock()
	f.sub = sub
	f.mu.Unlock()
}

// A subscription and a rule set over url in the running process: both
// are downloaded at start (no cache yet) and applied; the rule set
// matches once downloaded; PUT /providers/proxies/{name} and the CLI
// update now; the update applies over the configuration running, not
// the file as edited since; GET /providers/proxies shows the userinfo.
func TestSubscriptionAndRuleSetInTheRunningProcess(t *testing.T) {
	dir := t.TempDir()
	apiPort, upPort := freeLoopbackPort(t), freeLoopbackPort(t)
	f := newFeed(t)
	f.set(fmt.Sprintf("socks5://127.0.0.1:%d#A\nsocks5://127.0.0.1:%d#B\n", upPort, upPort))
	cfg := fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "up"
type = "socks"
listen = "127.0.0.1:%d"

[[providers]]
tag = "sub"
url = "%s/sub"
interval = "1h"

[[rule_sets]]
tag = "blk"
url = "%s/block.txt"
format = "clash-ipcidr"

[[groups]]
tag = "subs"
policy = "selector"
use = ["sub"]

[[rules]]
inbound = ["socks-in"]
rule_set = ["blk"]
outbound = "block"

[[rules]]
inbound = ["socks-in"]
outbound = "subs"
`, apiPort, upPort, f.URL, f.URL)
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startArgs(t, "run", "-c", path)
	defer p.stop()
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	p.waitLog("provider sub updated", 1, 10*time.Second)
	p.waitLog("reload applied", 1, 10*time.Second)
	echo := echoServer(t)
	// The rule set is not downloaded yet: it matches nothing.
	if err := flowEchoes(p.addr("socks-in"), echo); err != nil {
		t.Fatalf("no flow through the provider's node: %v\n%s", err, p.logs.String())
	}
	close(f.release)
	p.waitLog("rule set blk updated", 1, 10*time.Second)
	p.waitLog("reload applied", 2, 10*time.Second)
	if err := flowEchoes(p.addr("socks-in"), echo); err == nil {
		t.Fatal("a flow the downloaded rule set blocks went through")
	}

	var pv struct {
		Providers map[string]struct {
			VehicleType      string
			Proxies          []struct{ Name string }
			SubscriptionInfo *struct{ Upload, Download, Total, Expire int64 }
		}
	}
	code, body := apiCall(t, http.MethodGet, base+"/providers/proxies", "")
	if err := json.Unmarshal([]byte(body), &pv); code != 200 || err != nil {
		t.Fatalf("GET /providers/proxies: %d %s", code, body)
	}
	sub := pv.Providers["sub"]
	if sub.VehicleType != "HTTP" || len(sub.Proxies) != 2 || sub.SubscriptionInfo == nil ||
		*sub.SubscriptionInfo != (struct{ Upload, Download, Total, Expire int64 }{5, 6, 1000, 1900000000}) {
		t.Fatalf("GET /providers/proxies: %s", body)
	}
	var rv struct {
		Providers map[string]struct{ RuleCount int }
	}
	_, body = apiCall(t, http.MethodGet, base+"/providers/rules", "")
	if json.Unmarshal([]byte(body), &rv); rv.Providers["blk"].RuleCount != 1 {
		t.Fatalf("GET /providers/rules: %s", body)
	}

	// The CLI asks the running process; an unchanged subscription is a
	// 304.
	out, err := exec.Command(bin, "provider", "update", "-c", path, "sub").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "through the running process") || !strings.Contains(string(out), "provider sub: ok") {
		t.Fatalf("provider update: %v\n%s", err, out)
	}
	f.mu.Lock()
	subs := f.subs
	f.mu.Unlock()
	if subs != 1 {
		t.Fatalf("%d full downloads of an unchanged subscription, want 1", subs)
	}

	// The file is edited (broken) meanwhile; a changed subscription still
	// applies over the configuration running.
	if err := os.WriteFile(path, []byte("[[inbounds]]\ntag = 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.set(fmt.Sprintf("socks5://127.0.0.1:%d#A\nsocks5://127.0.0.1:%d#B\nsocks5://127.0.0.1:%d#C\n", upPort, upPort, upPort))
	if code, body := apiCall(t, http.MethodPut, base+"/providers/proxies/sub", ""); code != 204 {
		t.Fatalf("PUT /providers/proxies/sub: %d %s\n%s", code, body, p.logs.String())
	}
	code, body = apiCall(t, http.MethodGet, base+"/providers/proxies/sub", "")
	if code != 200 || !strings.Contains(body, `"name":"C"`) {
		t.Fatalf("after the update: %d %s", code, body)
	}
	out, err = exec.Command(bin, "provider", "update", "-c", filepath.Join(dir, "missing.toml")).CombinedOutput()
	if err == nil {
		t.Fatalf("provider update of a missing file succeeded:\n%s", out)
	}
}

// Without a running process, provider update downloads into the cache
// itself; a failure is a non-zero exit naming the resource.
func TestProviderUpdateWithoutAProcess(t *testing.T) {
	dir := t.TempDir()
	f := newFeed(t)
	f.set("socks5://127.0.0.1:1080#A\n")
	close(f.release)
	cfg := fmt.Sprintf(`
[[providers]]
tag = "sub"
url = "%s/sub"
path = "sub.txt"

[[rule_sets]]
tag = "gone"
url = "%s/missing.txt"
format = "clash-domain"
`, f.URL, f.URL)
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "provider", "update", "-c", path, "sub").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "downloaded here") || !strings.Contains(string(out), "provider sub: ok") {
		t.Fatalf("provider update: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub.txt")); string(b) != "socks5://127.0.0.1:1080#A\n" {
		t.Fatalf("cache %q", b)
	}
	out, err = exec.Command(bin, "provider", "update", "-c", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "rule set gone: failed:") || !strings.Contains(string(out), "404") {
		t.Fatalf("provider update with a failing one: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "provider", "update", "-c", path, "nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "nope: no url provider or rule set has this tag") {
		t.Fatalf("provider update of an unknown tag: %v\n%s", err, out)
	}
}
