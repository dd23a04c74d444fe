package interop

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/internal/connpool"
	"switchyard/netx"
	"switchyard/protocol/vless"
)

// A pooled connection that the Xray server closed (its handshake policy
// set to 1 s, the pool's idle bound far above it) is never handed out: the
// flow gets a fresh connection and its VLESS request goes through.
func TestAPooledConnectionXrayClosedIsNotHandedOut(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "tcp"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var cert, key string
			if withTLS {
				cert, key = tlsFiles(t)
			}
			port := freePort(t)
			startPeer(t, "xray", idleInbound("xray", "vless", port, cert, key, 1), port)
			dial := func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp4", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil || !withTLS {
					return c, err
				}
				tc := tls.Client(c, &tls.Config{ServerName: interopHost, InsecureSkipVerify: true})
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}
			p := connpool.New(connpool.Config{Dial: dial, Idle: time.Minute})
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Fill(ctx, 1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // past the server's 1 s handshake timeout
			c, fromPool, err := p.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if fromPool {
				t.Fatal("the connection the server closed was handed out")
			}
			if st := p.Stats(); st.Dead != 1 {
				t.Fatalf("stats %+v, want the closed connection counted dead", st)
			}
			vlessEcho(t, c, tcpEcho(t))
		})
	}
}

// vlessEcho runs a VLESS TCP request to echo on c and checks the echo.
func vlessEcho(t *testing.T, c net.Conn, echo string) {
	t.Helper()
	id, err := vless.ParseUUID(interopUUID)
	if err != nil {
		t.Fatal(err)
	}
	to, err := netx.ParseAddr(echo)
	if err != nil {
		t.Fatal(err)
	}
	req, err := vless.AppendRequest(nil, &id, vless.CmdTCP, to)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("pooled-or-not")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append(req, payload...)); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Fatalf("VLESS response: %v", err)
	}
	n, err := vless.ResponseLen(head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, n-2)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo %q, %v", got, err)
	}
}
