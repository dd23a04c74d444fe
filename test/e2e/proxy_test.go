package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

const twoInbounds = `
[log]
level = "debug"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[inbounds]]
tag = "http-in"
type = "http"
listen = "127.0.0.1:0"
`

func webServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func httpClientVia(proxy *url.URL) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	return string(b)
}

func TestGetThroughHTTPAndSOCKS(t *testing.T) {
	web := webServer(t)
	p := start(t, twoInbounds)
	viaHTTP := httpClientVia(&url.URL{Scheme: "http", Host: p.addr("http-in")})
	if got := get(t, viaHTTP, web.URL+"/a"); got != "hello /a" {
		t.Fatalf("through http: %q", got)
	}
	// Keep-alive: a second request on the same proxy connection.
	if got := get(t, viaHTTP, web.URL+"/b"); got != "hello /b" {
		t.Fatalf("through http, second request: %q", got)
	}
	viaSOCKS := httpClientVia(&url.URL{Scheme: "socks5", Host: p.addr("socks-in")})
	if got := get(t, viaSOCKS, web.URL+"/c"); got != "hello /c" {
		t.Fatalf("through socks: %q", got)
	}
}

func TestConnectThroughBoth(t *testing.T) {
	echo := echoServer(t)
	p := start(t, twoInbounds)
	c, err := socksclient.Dial(p.addr("socks-in"), echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, 1<<20)

	hc, err := net.Dial("tcp", p.addr("http-in"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(hc, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo, echo)
	br := bufio.NewReader(hc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roundTrip(t, hc, 1<<20)
}

// roundTrip sends n bytes and expects them echoed back, then half-closes and
// expects EOF.
func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if string(got) != string(payload) {
		t.Fatalf("echoed %d bytes, want %d identical", len(got), n)
	}
}

func TestAuthRequiredAndRefused(t *testing.T) {
	web := webServer(t)
	p := start(t, `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "s3cret" }]

[[inbounds]]
tag = "http-in"
type = "http"
listen = "127.0.0.1:0"
users = [{ username = "alice", password = "s3cret" }]
`)
	echo := echoServer(t)
	if _, err := socksclient.Dial(p.addr("socks-in"), echo, "", ""); err == nil || !strings.Contains(err.Error(), "no acceptable method") {
		t.Fatalf("socks without credentials: %v", err)
	}
	if _, err := socksclient.Dial(p.addr("socks-in"), echo, "alice", "wrong"); err == nil || !strings.Contains(err.Error(), "auth refused") {
		t.Fatalf("socks with a wrong password: %v", err)
	}
	c, err := socksclient.Dial(p.addr("socks-in"), echo, "alice", "s3cret")
	if err != nil {
		t.Fatalf("socks with the right password: %v", err)
	}
	roundTrip(t, c, 1000)

	resp, err := httpClientVia(&url.URL{Scheme: "http", Host: p.addr("http-in")}).Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("http without credentials: %s", resp.Status)
	}
	resp, err = httpClientVia(&url.URL{Scheme: "http", Host: p.addr("http-in"), User: url.UserPassword("alice", "nope")}).Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("http with a wrong password: %s", resp.Status)
	}
	ok := httpClientVia(&url.URL{Scheme: "http", Host: p.addr("http-in"), User: url.UserPassword("alice", "s3cret")})
	if got := get(t, ok, web.URL+"/x"); got != "hello /x" {
		t.Fatalf("http with credentials: %q", got)
	}
	// CONNECT with credentials in the header.
	hc, err := net.Dial("tcp", p.addr("http-in"))
	if err != nil {
		t.Fatal(err)
	}
	cred := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	fmt.Fprintf(hc, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", echo, echo, cred)
	r, err := http.ReadResponse(bufio.NewReader(hc), nil)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("CONNECT with credentials: %v %v", r, err)
	}
	roundTrip(t, hc, 1000)
}

func TestBlockRuleGetsAFailureReply(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	p := start(t, twoInbounds+fmt.Sprintf(`
[[rules]]
port = [%s]
outbound = "block"
`, port))
	_, err := socksclient.Dial(p.addr("socks-in"), echo, "", "")
	var se socksclient.ReplyError
	if !errors.As(err, &se) || se.Code != 0x02 {
		t.Fatalf("blocked CONNECT: %v, want reply 0x02 (not allowed by ruleset)", err)
	}
	hc, err := net.Dial("tcp", p.addr("http-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	fmt.Fprintf(hc, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", echo, echo)
	r, err := http.ReadResponse(bufio.NewReader(hc), nil)
	if err != nil || r.StatusCode != http.StatusForbidden {
		t.Fatalf("blocked HTTP CONNECT: %v %v", r, err)
	}
}

func TestDeadUpstreamGetsConnectionRefused(t *testing.T) {
	ln := listenTCP(t)
	dead := ln.Addr().String()
	ln.Close()
	p := start(t, twoInbounds)
	_, err := socksclient.Dial(p.addr("socks-in"), dead, "", "")
	var se socksclient.ReplyError
	if !errors.As(err, &se) || se.Code != 0x05 {
		t.Fatalf("CONNECT to a closed port: %v, want reply 0x05", err)
	}
}

func TestSniffedDomainRoutesAnIPFlow(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	defer tlsSrv.Close()
	web := webServer(t)
	p := start(t, `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
sniff = true

[[rules]]
domain_suffix = ["blocked.example"]
outbound = "block"
`)
	// TLS by IP with SNI blocked.example: sniffed, matched, blocked.
	c, err := socksclient.Dial(p.addr("socks-in"), tlsSrv.Listener.Addr().String(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "www.blocked.example", InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("TLS to a sniffed, blocked domain completed a handshake")
	}
	tc.Close()
	// The same server under another name goes through.
	c, err = socksclient.Dial(p.addr("socks-in"), tlsSrv.Listener.Addr().String(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc = tls.Client(c, &tls.Config{ServerName: "allowed.example", InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to an allowed name: %v", err)
	}
	tc.Close()
	// Plain HTTP by IP with Host: blocked.example.
	c, err = socksclient.Dial(p.addr("socks-in"), web.Listener.Addr().String(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: blocked.example\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Fatal("HTTP to a sniffed, blocked Host got a response")
	}
}

func TestUDPRoutedPerPeer(t *testing.T) {
	allowed := udpEcho(t, "a:")
	blocked := udpEcho(t, "b:")
	_, blockedPort, _ := net.SplitHostPort(blocked.LocalAddr().String())
	p := start(t, fmt.Sprintf(`
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[rules]]
network = "udp"
port = [%s]
outbound = "block"
`, blockedPort))
	a, err := socksclient.Associate(p.addr("socks-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	exchange := func(to *net.UDPConn, msg string) (string, bool) {
		a.Send(to.LocalAddr().String(), []byte(msg))
		from, payload, ok := a.Recv(time.Second)
		if ok && from != to.LocalAddr().String() {
			t.Fatalf("reply attributed to %s, want %s", from, to.LocalAddr())
		}
		return string(payload), ok
	}
	if got, ok := exchange(allowed, "1"); !ok || got != "a:1" {
		t.Fatalf("allowed peer: %q %v", got, ok)
	}
	if got, ok := exchange(blocked, "2"); ok {
		t.Fatalf("blocked peer answered %q", got)
	}
	if got, ok := exchange(allowed, "3"); !ok || got != "a:3" {
		t.Fatalf("allowed peer after a blocked one: %q %v", got, ok)
	}
}

func TestUDPRepliesFromTwoPeers(t *testing.T) {
	one := udpEcho(t, "one:")
	two := udpEcho(t, "two:")
	p := start(t, twoInbounds)
	a, err := socksclient.Associate(p.addr("socks-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Send(one.LocalAddr().String(), []byte("x"))
	a.Send(two.LocalAddr().String(), []byte("y"))
	got := map[string]string{}
	for range 2 {
		from, payload, ok := a.Recv(2 * time.Second)
		if !ok {
			t.Fatalf("missing reply; got %v", got)
		}
		got[from] = string(payload)
	}
	if got[one.LocalAddr().String()] != "one:x" || got[two.LocalAddr().String()] != "two:y" {
		t.Fatalf("replies %v", got)
	}
}

func TestNetworkRuleSeparatesUDPFromTCP(t *testing.T) {
	peer := udpEcho(t, "u:")
	echo := echoServer(t)
	p := start(t, twoInbounds+`
[[rules]]
network = "udp"
outbound = "block"
`)
	a, err := socksclient.Associate(p.addr("socks-in"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Send(peer.LocalAddr().String(), []byte("x"))
	if _, payload, ok := a.Recv(time.Second); ok {
		t.Fatalf("UDP passed a network = udp block rule: %q", payload)
	}
	c, err := socksclient.Dial(p.addr("socks-in"), echo, "", "")
	if err != nil {
		t.Fatalf("TCP blocked by a UDP rule: %v", err)
	}
	roundTrip(t, c, 4096)
}

func TestCheckNamesKeyAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(path, []byte("[log]\nlevel = \"info\"\n\n[[inbounds]]\ntag = \"in\"\ntype = \"socks\"\nlisten = \"127.0.0.1:1080\"\nlisen = \"x\"\n"), 0o600)
	out, err := exec.Command(bin, "check", "-c", path).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("check exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "lisen") || !strings.Contains(string(out), ":8:") {
		t.Fatalf("check output does not name the key and its line 8:\n%s", out)
	}
	path2 := filepath.Join(t.TempDir(), "vmess.toml")
	os.WriteFile(path2, []byte("[[outbounds]]\ntag = \"v\"\ntype = \"tuic\"\n"), 0o600)
	out, err = exec.Command(bin, "check", "-c", path2).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown outbound type "tuic"`) {
		t.Fatalf("tuic accepted by check: %v\n%s", err, out)
	}
	good := filepath.Join(t.TempDir(), "good.toml")
	os.WriteFile(good, []byte(twoInbounds), 0o600)
	if out, err := exec.Command(bin, "check", "-c", good).CombinedOutput(); err != nil {
		t.Fatalf("check of a good file: %v\n%s", err, out)
	}
}

func TestSignalsStopWithinFiveSeconds(t *testing.T) {
	echo := echoServer(t)
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := start(t, twoInbounds)
		c, err := socksclient.Dial(p.addr("socks-in"), echo, "", "")
		if err != nil {
			t.Fatal(err)
		}
		took, err := p.signal(sig)
		if err != nil || took > 5*time.Second {
			t.Fatalf("%v: exit %v after %v", sig, err, took)
		}
		// The open flow was closed.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%v: flow still open after exit: %v", sig, err)
		}
		c.Close()
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "switchyard ") {
		t.Fatalf("version: %q %v", out, err)
	}
}

func TestDefaultConfigServesAMixedProxy(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.1:7890"); err != nil {
		t.Fatalf("the default port 127.0.0.1:7890 is taken: %v", err)
	} else {
		ln.Close()
	}
	web := webServer(t)
	p := startArgs(t) // no subcommand: run on the embedded default
	addr := p.addr("mixed-in")
	if addr != "127.0.0.1:7890" {
		t.Fatalf("default inbound on %s", addr)
	}
	if got := get(t, httpClientVia(&url.URL{Scheme: "http", Host: addr}), web.URL+"/d"); got != "hello /d" {
		t.Fatalf("http through the default: %q", got)
	}
	if got := get(t, httpClientVia(&url.URL{Scheme: "socks5", Host: addr}), web.URL+"/e"); got != "hello /e" {
		t.Fatalf("socks through the default: %q", got)
	}
}
