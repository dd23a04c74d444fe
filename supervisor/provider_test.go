package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// providerConfig writes the config text and the provider file beside it,
// and loads them as a reload would.
func providerConfig(t *testing.T, dir, text, links string) *spec.Spec {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "sub.txt"), []byte(links), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const providerText = `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[providers]]
tag = "sub"
path = "sub.txt"
[[groups]]
tag = "pick"
policy = "selector"
use = ["sub"]
default = "%s"
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "pick"
`

// A group with use routes a flow through a provider node: a socks5 share
// link to an upstream switchyard that goes direct.
func TestAGroupWithUseRoutesThroughAProviderNode(t *testing.T) {
	_, upstream := run(t, baseSpec(), Options{})
	dir := t.TempDir()
	links := "socks5://127.0.0.1:1#Other\nsocks5://" + upstream + "#Up%20%E2%91%A0\n"
	sv, proxy := run(t, providerConfig(t, dir, fmt.Sprintf(providerText, "Up ①"), links), Options{})
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echoOnce(c, "via the provider"); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range sv.Tracker().Flows() {
		found = found || f.Outbound == "Up ①@v1"
	}
	if !found {
		t.Fatalf("no flow on the provider node: %+v", sv.Tracker().Flows())
	}
}

// An edited provider file, on reload, rebuilds only the node that changed:
// the others keep their outbound version.
func TestAnEditedProviderRebuildsOnlyTheChangedNode(t *testing.T) {
	dir := t.TempDir()
	text := fmt.Sprintf(providerText, "A")
	before := "socks5://127.0.0.1:1001#A\nsocks5://127.0.0.1:1002#B\nsocks5://127.0.0.1:1003#C\n"
	sv, _ := run(t, providerConfig(t, dir, text, before), Options{})
	after := "socks5://127.0.0.1:1001#A\nsocks5://127.0.0.1:2002#B\nsocks5://127.0.0.1:1003#C\nsocks5://127.0.0.1:1004#D\n"
	if err := sv.Apply(providerConfig(t, dir, text, after)); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"A": 1, "B": 2, "C": 1, "D": 1}
	deadline := time.Now().Add(2 * time.Second)
	for tag, v := range want {
		target, ok := sv.Plane().Targets[tag]
		for !ok && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			target, ok = sv.Plane().Targets[tag]
		}
		if !ok {
			t.Fatalf("no target %q after the reload", tag)
		}
		if got := target.ID().Version; got != v {
			t.Errorf("%s: version %d, want %d", tag, got, v)
		}
	}
	// A node removed from the file leaves the plane.
	if err := sv.Apply(providerConfig(t, dir, text, "socks5://127.0.0.1:1001#A\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok := sv.Plane().Targets["B"]; ok {
		t.Error("a node removed from the provider is still a target")
	}
	if v := sv.Plane().Targets["A"].ID().Version; v != 1 {
		t.Errorf("A: version %d after the second reload, want 1", v)
	}
}
