package interop

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"switchyard/internal/connpool"
)

// A kept pool learns each real server's idle bound: Xray with a 4 s
// handshake policy (counted from the accept, TLS included) to a bound
// under 3 s; sing-box, which keeps an idle connection open, up to the cap
// (10 s here, 120 s by default) less a second. The connection handed out
// afterwards still carries a VLESS request.
func TestThePoolLearnsTheServersIdleBound(t *testing.T) {
	for _, tc := range []struct {
		peer     string
		withTLS  bool
		min, max time.Duration
	}{
		{"xray", false, 2 * time.Second, 3 * time.Second},
		{"xray", true, 2 * time.Second, 3 * time.Second},
		{"sing-box", false, 9 * time.Second, 9 * time.Second},
	} {
		name := tc.peer + "/tcp"
		if tc.withTLS {
			name = tc.peer + "/tls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var cert, key string
			if tc.withTLS {
				cert, key = tlsFiles(t)
			}
			port := freePort(t)
			startPeer(t, tc.peer, idleInbound(tc.peer, "vless", port, cert, key, 4), port)
			dial := func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp4", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil || !tc.withTLS {
					return c, err
				}
				tc := tls.Client(c, &tls.Config{ServerName: interopHost, InsecureSkipVerify: true})
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}
			p := connpool.New(connpool.Config{Dial: dial, Refresh: true, Cap: 10 * time.Second})
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Fill(ctx, 1); err != nil {
				t.Fatal(err)
			}
			for p.Stats().Learning {
				if ctx.Err() != nil {
					t.Fatalf("still learning: %+v", p.Stats())
				}
				time.Sleep(20 * time.Millisecond)
			}
			st := p.Stats()
			t.Logf("%s: learned idle bound %s", name, st.IdleBound)
			if st.IdleBound < tc.min || st.IdleBound > tc.max || st.Sentinel {
				t.Fatalf("learned %s, want %s–%s: %+v", st.IdleBound, tc.min, tc.max, st)
			}
			if err := p.Fill(ctx, 1); err != nil {
				t.Fatal(err)
			}
			c, _, err := p.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			vlessEcho(t, c, tcpEcho(t))
		})
	}
}
