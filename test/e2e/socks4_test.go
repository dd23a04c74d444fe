package e2e

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// socks4Config has a socks and a mixed inbound of each kind: without users,
// with users and socks4 = true, and with users alone. Only what a rule lets
// through reaches a web server: a name (localhost), the IP 127.0.0.1 on
// ipPort, or user alice.
const socks4Config = `
[log]
level = "debug"

[[inbounds]]
tag = "socks-open"
type = "socks"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "mixed-open"
type = "mixed"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "socks-users"
type = "socks"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "a" }, { username = "bob", password = "b" }]
socks4 = true

[[inbounds]]
tag = "mixed-users"
type = "mixed"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "a" }, { username = "bob", password = "b" }]
socks4 = true

[[inbounds]]
tag = "socks-no4"
type = "socks"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "a" }]

[[inbounds]]
tag = "mixed-no4"
type = "mixed"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "a" }]

[route]
final = "block"

[[rules]]
domain = ["localhost"]
outbound = "direct"

[[rules]]
ip_cidr = ["127.0.0.1/32"]
port = [%d]
outbound = "direct"

[[rules]]
user = ["alice"]
outbound = "direct"
`

// curl runs the curl command with args and returns what it printed and its
// error. Proxy settings of the environment are left out: only args choose
// the proxy.
func curl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl is not installed (scripts/test.sh installs it): %v", err)
	}
	cmd := exec.Command(path, append([]string{"-sS", "--max-time", "10"}, args...)...)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !strings.HasSuffix(strings.ToLower(name), "_proxy") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// curlGets requires curl to fetch u with args and get the web server's
// answer for path.
func curlGets(t *testing.T, u, path string, args ...string) {
	t.Helper()
	out, errOut, err := curl(t, append(args, u+path)...)
	if err != nil || out != "hello "+path {
		t.Fatalf("curl %s %s: %q, %v\n%s", strings.Join(args, " "), u+path, out, err, errOut)
	}
}

// curlRefused requires curl to be refused by the proxy with SOCKS4 reply
// code (91 is 0x5B, 93 is 0x5D).
func curlRefused(t *testing.T, u string, code int, args ...string) {
	t.Helper()
	out, errOut, err := curl(t, append(args, u)...)
	if err == nil || !strings.Contains(errOut, fmt.Sprintf("(%d)", code)) {
		t.Fatalf("curl %s %s: %q, %v; want SOCKS4 refusal %d\n%s", strings.Join(args, " "), u, out, err, code, errOut)
	}
}

func TestSOCKS4WithCurl(t *testing.T) {
	byIP, byName := webServer(t), webServer(t)
	ipURL, _ := url.Parse(byIP.URL)
	nameURL, _ := url.Parse(byName.URL)
	ipPort := ipURL.Port()
	var port int
	fmt.Sscan(ipPort, &port)
	p := start(t, fmt.Sprintf(socks4Config, port))
	toIP := "http://127.0.0.1:" + ipPort
	toName := "http://localhost:" + nameURL.Port()
	toNameByIP := "http://127.0.0.1:" + nameURL.Port()

	for _, kind := range []string{"socks", "mixed"} {
		t.Run(kind, func(t *testing.T) {
			open := p.addr(kind + "-open")
			// SOCKS4 carries the IP curl resolved; SOCKS4a the name.
			curlGets(t, toIP, "/v4", "--socks4", open)
			curlGets(t, toName, "/v4a", "--socks4a", open)
			// The name of byName is what lets a flow reach it: from SOCKS4,
			// which resolves it on the client, the rule cannot see it.
			curlRefused(t, toName+"/", 91, "--socks4", open)
			// A user id means nothing without users: bob is no one here.
			curlGets(t, toName, "/anyone", "--socks4a", open, "--proxy-user", "bob:")

			users := p.addr(kind + "-users")
			// Only the rule on user alice reaches byName by its IP.
			curlGets(t, toNameByIP, "/alice", "--socks4", users, "--proxy-user", "alice:")
			curlGets(t, toName, "/alice4a", "--socks4a", users, "--proxy-user", "alice:")
			curlRefused(t, toNameByIP+"/", 91, "--socks4", users, "--proxy-user", "bob:")
			curlRefused(t, toIP+"/", 93, "--socks4", users, "--proxy-user", "mallory:")
			curlRefused(t, toName+"/", 93, "--socks4a", users)

			// Users without socks4 = true: SOCKS4 is refused, even for a
			// user's name.
			curlRefused(t, toIP+"/", 91, "--socks4", p.addr(kind+"-no4"), "--proxy-user", "alice:")
		})
	}
}
