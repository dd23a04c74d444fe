package http

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/outbound"
	"switchyard/spec"
)

func TestAuthentication(t *testing.T) {
	o := newOrigin(t)
	conn, proxy := start(t, Config{Users: []spec.User{{Username: "alice", Password: "s3cret"}}})
	basic := func(user, pass string) string {
		return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
	}
	get := "GET http://" + o.hostPort() + "/ HTTP/1.1\r\n"
	// A request without credentials keeps its connection, as browsers
	// expect: they retry on it with credentials. Wrong credentials end it.
	for _, tc := range []struct {
		name, auth string
		keep       bool
	}{
		{"missing", "", true},
		{"wrong password", basic("alice", "nope"), false},
		{"other scheme", "Proxy-Authorization: Bearer abc\r\n", false},
	} {
		cl := dial(t, proxy)
		cl.send(get + tc.auth + "\r\n")
		resp, _ := cl.response("GET")
		if resp.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("%s: status %d, want 407", tc.name, resp.StatusCode)
		}
		if got := resp.Header.Get("Proxy-Authenticate"); got != `Basic realm="switchyard"` {
			t.Fatalf("%s: Proxy-Authenticate %q", tc.name, got)
		}
		if resp.Close == tc.keep {
			t.Fatalf("%s: Connection: close is %v, want %v", tc.name, resp.Close, !tc.keep)
		}
		if !tc.keep {
			cl.closed()
			continue
		}
		// The retry on the same connection succeeds.
		cl.send(get + basic("alice", "s3cret") + "\r\n")
		if resp, _ := cl.response("GET"); resp.StatusCode != 200 {
			t.Fatalf("status %d with the right credentials", resp.StatusCode)
		}
	}
	if f := conn.Flows(); len(f) != 1 || f[0].User != "alice" {
		t.Fatalf("flows %+v; want one of user alice", f)
	}
	reqs, _ := o.received()
	if _, ok := reqs[0].Header["Proxy-Authorization"]; ok {
		t.Fatal("the credentials reached the origin")
	}

	// CONNECT is refused the same way.
	cl2 := dial(t, proxy)
	cl2.send("CONNECT " + o.hostPort() + " HTTP/1.1\r\n\r\n")
	if resp, _ := cl2.response(http.MethodConnect); resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("CONNECT without credentials: status %d", resp.StatusCode)
	}
}

// Wrong credentials pipelined on one keep-alive connection get one 407 and
// the close: the rest are never read, let alone checked.
func TestWrongCredentialsPipelinedGetOneAnswer(t *testing.T) {
	o := newOrigin(t)
	conn, proxy := start(t, Config{Users: []spec.User{{Username: "alice", Password: "s3cret"}}})
	cl := dial(t, proxy)
	req := "GET http://" + o.hostPort() + "/ HTTP/1.1\r\nProxy-Authorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte("alice:guess")) + "\r\n\r\n"
	go io.WriteString(cl.c, strings.Repeat(req, 200)) // may fail once the proxy closes
	resp, _ := cl.response("GET")
	if resp.StatusCode != http.StatusProxyAuthRequired || !resp.Close {
		t.Fatalf("status %d, close %v; want 407 and close", resp.StatusCode, resp.Close)
	}
	cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(cl.br)
	if len(rest) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("after the first 407: %q, %v; want the end of the connection", rest, err)
	}
	if len(conn.Flows()) != 0 {
		t.Fatal("a flow was opened")
	}
}

func TestDialErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().String()
	ln.Close()

	blocked := inboundtest.NewConnector(t)
	blocked.Err = fmt.Errorf("block[block]: %w", outbound.ErrBlocked)
	blockedProxy := inboundtest.Serve(t, New(Config{Tag: "b"}, blocked, inboundtest.Logger(t)))
	_, proxy := start(t, Config{})

	tests := []struct {
		name, proxy, request string
		method               string
		want                 int
	}{
		{"blocked connect", blockedProxy, "CONNECT ads.example:443 HTTP/1.1\r\n\r\n", http.MethodConnect, http.StatusForbidden},
		{"blocked get", blockedProxy, "GET http://ads.example/ HTTP/1.1\r\n\r\n", "GET", http.StatusForbidden},
		{"refused connect", proxy, "CONNECT " + closedPort + " HTTP/1.1\r\n\r\n", http.MethodConnect, http.StatusBadGateway},
		{"refused get", proxy, "GET http://" + closedPort + "/ HTTP/1.1\r\n\r\n", "GET", http.StatusBadGateway},
		{"origin form", proxy, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "GET", http.StatusBadRequest},
		{"https target", proxy, "GET https://example.com/ HTTP/1.1\r\n\r\n", "GET", http.StatusBadRequest},
		{"connect without port", proxy, "CONNECT example.com HTTP/1.1\r\n\r\n", http.MethodConnect, http.StatusBadRequest},
		{"garbage", proxy, "\x16\x03\x01 hello\r\n\r\n", "GET", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := dial(t, tt.proxy)
			cl.send(tt.request)
			resp, _ := cl.response(tt.method)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			cl.closed()
		})
	}
}

// A client that waits for 100 Continue and is refused gets the refusal and
// the close, not a wait for a body it will not send.
func TestAuthenticationExpectContinue(t *testing.T) {
	_, proxy := start(t, Config{Users: []spec.User{{Username: "u", Password: "p"}}})
	cl := dial(t, proxy)
	cl.send("POST http://example.com/ HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, _ := cl.response("POST")
	if resp.StatusCode != http.StatusProxyAuthRequired || !resp.Close {
		t.Fatalf("status %d close=%v; want 407 and close", resp.StatusCode, resp.Close)
	}
	cl.closed()
}

// A request head is bounded at 64 KiB: past it the client gets 431, whether
// the head is many lines or one endless one; a head just under it is served.
func TestHeadTooLarge(t *testing.T) {
	o := newOrigin(t)
	_, proxy := start(t, Config{})
	for _, tc := range []struct {
		name  string
		lines []string
		want  int
	}{
		{"many lines past 64 KiB", repeat("X-Filler: "+strings.Repeat("a", 1000)+"\r\n", 70), http.StatusRequestHeaderFieldsTooLarge},
		{"one line of 1 MiB", []string{"X: " + strings.Repeat("a", 1<<20)}, http.StatusRequestHeaderFieldsTooLarge},
		{"just under 64 KiB", repeat("X-Filler: "+strings.Repeat("a", 1000)+"\r\n", 60), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := dial(t, proxy)
			go func() {
				io.WriteString(cl.c, "GET http://"+o.hostPort()+"/ HTTP/1.1\r\n")
				for _, line := range tc.lines {
					if _, err := io.WriteString(cl.c, line); err != nil {
						return
					}
				}
				io.WriteString(cl.c, "\r\n")
			}()
			resp, _ := cl.response("GET")
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
