package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"switchyard/config"
	"switchyard/test/socksclient"
)

// A group whose only members come from a url provider not downloaded yet
// has no member: the supervisor builds it, flows through it are refused
// (or go to its final), and the nodes are picked up when the download
// applies.
func TestAGroupOfAPendingProviderBuildsAndPicksUpItsNodes(t *testing.T) {
	for _, policy := range []string{"selector", "urltest", "fallback", "loadbalance", "score"} {
		t.Run(policy, func(t *testing.T) {
			_, upstream := run(t, baseSpec(), Options{})
			dir := t.TempDir()
			cache := filepath.Join(dir, "sub-cache.txt")
			text := fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[providers]]
tag = "sub"
url = "http://127.0.0.1:1/sub"
path = %q
[[groups]]
tag = "pick"
policy = %q
use = ["sub"]
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "pick"
`, cache, policy)
			path := filepath.Join(dir, "sy.toml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			s, _, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			sv, proxy := run(t, s, Options{})
			if c, err := socksclient.Dial(proxy, tcpEcho(t), "", ""); err == nil {
				c.Close()
				t.Fatal("a flow through a group with no member was not refused")
			}
			if err := os.WriteFile(cache, []byte("socks5://"+upstream+"#Up\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s2, _, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := sv.Apply(s2); err != nil {
				t.Fatal(err)
			}
			c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := echoOnce(c, "after the download"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
