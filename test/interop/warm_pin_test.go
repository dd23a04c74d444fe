package interop

import (
	"fmt"
	"testing"
	"time"
)

// The selector pin against Xray servers whose handshake policy closes a
// connection that sent no request after 1 s: the pinned connection
// carries a flow while it lives; once Xray closed it, a flow is never
// handed it and succeeds on a fresh connection.
func TestWarmPinAgainstXray(t *testing.T) {
	for _, tc := range []struct{ name, protocol, keys string }{
		{"vless/tls", "vless", fmt.Sprintf("uuid = %q", interopUUID)},
		{"trojan/tls", "trojan", fmt.Sprintf("password = %q", interopPassword)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cert, key := tlsFiles(t)
			port := freePort(t)
			startPeer(t, "xray", idleInbound("xray", tc.protocol, port, cert, key, 1), port)
			sv, proxy := runConfig(t, fmt.Sprintf(`
[warmup]
preconnect = 0
selector_pin = true

[health]
tcp_check_url = [%q]
udp_check_dns = []

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "node"
type = %q
server = "127.0.0.1:%d"
%s
%s

[[groups]]
tag = "pick"
policy = "selector"
members = ["node"]

[route]
final = "pick"
`, probeServer(t), tc.protocol, port, tc.keys, clientTLS(cert)))
			waitPinned := func(within time.Duration) {
				t.Helper()
				for deadline := time.Now().Add(within); ; {
					if st, _ := sv.WarmNode("node"); st.Pooled == 1 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatal("the selector's choice has no pooled connection")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			waitPinned(5 * time.Second)
			checkTCP(t, proxy) // on the pooled connection, well within 1 s
			// The flow took it: the next pass (10 s) pins another.
			waitPinned(15 * time.Second)
			// Past Xray's 1 s handshake policy the server has closed it
			// (it is still younger than the pool's 3 s bound).
			time.Sleep(1500 * time.Millisecond)
			checkTCP(t, proxy)
		})
	}
}
