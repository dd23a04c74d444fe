package api

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/spec"
	"switchyard/supervisor"
	"switchyard/test/socksclient"
)

// rig is a supervisor built in-process from a configuration and the API
// over it, listening on loopback.
type rig struct {
	sv   *supervisor.Supervisor
	srv  *Server
	spec *spec.Spec
	base string // http://127.0.0.1:port
	web  *httptest.Server
}

// baseConfig routes everything to the selector "pick" over two direct
// outbounds; "auto" is a urltest over the same two. Health probes the
// rig's web server.
const baseConfig = `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "d1"
type = "direct"

[[outbounds]]
tag = "d2"
type = "direct"

[[groups]]
tag = "pick"
policy = "selector"
members = ["d1", "d2"]

[[groups]]
tag = "auto"
policy = "urltest"
members = ["d1", "d2"]

[health]
tcp_check_url = ["WEB/generate_204"]
udp_check_dns = []
check_interval = "1h"
check_timeout = "2s"

[route]
final = "pick"
`

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	return newRigWith(t, opts, "")
}

// newRigWith is newRig with extra appended to the configuration.
func newRigWith(t *testing.T, opts Options, extra string) *rig {
	t.Helper()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(web.Close)
	s, _, err := config.Parse([]byte(strings.ReplaceAll(baseConfig+extra, "WEB", web.URL)), "api-test.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, err := supervisor.New(s, supervisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	opts.Spec = s
	srv := New(sv, opts)
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &rig{sv: sv, srv: srv, spec: s, base: "http://" + srv.Addr().String(), web: web}
}

// do sends a request with the bearer token secret (none when "") and
// returns the status and body.
func (r *rig) do(t *testing.T, method, path, secret, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// get GETs path and decodes the JSON answer into v, failing unless the
// status is want.
func (r *rig) get(t *testing.T, path string, want int, v any) {
	t.Helper()
	code, b := r.do(t, "GET", path, r.srv.opts.Secret, "")
	if code != want {
		t.Fatalf("GET %s: %d %s, want %d", path, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
}

// echo is a TCP echo server; its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// flow opens a flow through the socks inbound to dst and checks it echoes.
func (r *rig) flow(t *testing.T, dst string) net.Conn {
	t.Helper()
	c, err := socksclient.Dial(r.sv.Addr("socks-in").String(), dst, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Time{})
	return c
}

// waitClosed waits for c's peer to close it.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the flow is still open")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the flow was not closed")
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
