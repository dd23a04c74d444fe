package interop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// The XHTTP transport against the pinned Xray server, whose inbound takes
// every mode ("auto" on the server): each case runs the 1 MiB TCP echo and
// UDP to two peers (VLESS with XUDP: per-packet addresses over one flow).
//
//	mode        HTTP            tls
//	stream-one  h2c, h2         no, yes
//	stream-up   h2c, h2         no, yes
//	packet-up   HTTP/1.1        no
//	packet-up   h2              yes
//	packet-up   HTTP/1.1        yes (alpn ["http/1.1"])
//	auto        = packet-up     no, yes
//
// VMess (stream-up, h2c) and Trojan (stream-one, h2) run the same checks
// once each: the transport is the same under every proxy client.

const xhPath = "/xh-interop"

type xhCase struct {
	name  string
	mode  string
	tls   bool
	h1TLS bool   // over TLS with alpn ["http/1.1"]
	h3    bool   // over HTTP/3: alpn ["h3"] on both ends
	xmux  string // the xmux table's keys, when set
	keys  string // more keys of the transport table, written as they are
	// download, when not 0, is the port of the download's own path to
	// the same server (the download settings' server).
	download int
}

var xhCases = []xhCase{
	{name: "stream-one", mode: "stream-one"},
	{name: "stream-one+tls", mode: "stream-one", tls: true},
	{name: "stream-up", mode: "stream-up"},
	{name: "stream-up+tls", mode: "stream-up", tls: true},
	{name: "packet-up", mode: "packet-up"},
	{name: "packet-up+tls", mode: "packet-up", tls: true},
	{name: "packet-up+tls/http1.1", mode: "packet-up", tls: true, h1TLS: true},
	{name: "packet-up+tls/ranges", mode: "packet-up", tls: true, keys: `sc_max_each_post_bytes = "100000-500000", sc_min_posts_interval_ms = "5-20"`},
	{name: "auto", mode: "auto"},
	{name: "auto+tls", mode: "auto", tls: true},
	{name: "stream-one+h3", mode: "stream-one", tls: true, h3: true},
	{name: "stream-up+h3", mode: "stream-up", tls: true, h3: true},
	{name: "packet-up+h3", mode: "packet-up", tls: true, h3: true},
}

// xhXrayConfig is an Xray server with one inbound of protocol over XHTTP.
func xhXrayConfig(protocol string, port int, cert, key string) string {
	return xhXrayConfigALPN(protocol, port, cert, key, "")
}

// xhXrayConfigALPN is xhXrayConfig with the TLS ALPN list alpn (JSON), when
// not "".
func xhXrayConfigALPN(protocol string, port int, cert, key, alpn string) string {
	var settings string
	switch protocol {
	case "trojan":
		settings = fmt.Sprintf(`{"clients":[{"password":%q}]}`, interopPassword)
	case "vless":
		settings = fmt.Sprintf(`{"clients":[{"id":%q}],"decryption":"none"}`, interopUUID)
	default:
		settings = fmt.Sprintf(`{"clients":[{"id":%q,"alterId":0}]}`, interopUUID)
	}
	security := `"security":"none"`
	if cert != "" {
		if alpn != "" {
			alpn = `"alpn":` + alpn + ","
		}
		security = fmt.Sprintf(`"security":"tls","tlsSettings":{%s"certificates":[{"certificateFile":%q,"keyFile":%q}]}`, alpn, cert, key)
	}
	return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":%q,"settings":%s,"streamSettings":{"network":"xhttp",%s,"xhttpSettings":{"path":%q,"mode":"auto"}}}],"outbounds":[{"protocol":"freedom"}]}`,
		port, protocol, settings, security, xhPath)
}

// xhOutbound is switchyard's outbound for the case.
func xhOutbound(protocol string, c xhCase, port int, cert string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[outbounds]]\ntag = \"proxy\"\ntype = %q\nserver = \"127.0.0.1:%d\"\n", protocol, port)
	switch protocol {
	case "trojan":
		fmt.Fprintf(&b, "password = %q\n", interopPassword)
	case "vless":
		fmt.Fprintf(&b, "uuid = %q\npacket_encoding = \"xudp\"\n", interopUUID)
	default:
		fmt.Fprintf(&b, "uuid = %q\npacket_encoding = \"xudp\"\n", interopUUID)
	}
	xmux := ""
	if c.xmux != "" {
		xmux = ", xmux = { " + c.xmux + " }"
	}
	if c.download != 0 {
		xmux += fmt.Sprintf(`, download = { server = "127.0.0.1:%d" }`, c.download)
	}
	if c.keys != "" {
		xmux += ", " + c.keys
	}
	fmt.Fprintf(&b, "transport = { type = \"xhttp\", path = %q, mode = %q%s }\n", xhPath, c.mode, xmux)
	if c.tls {
		alpn := ""
		switch {
		case c.h1TLS:
			alpn = `, alpn = ["http/1.1"]`
		case c.h3:
			alpn = `, alpn = ["h3"]`
		}
		fmt.Fprintf(&b, "tls = { server_name = %q, ca_file = %q%s }\n", interopHost, cert, alpn)
	}
	return b.String()
}

// xhStart starts the case's Xray server and a switchyard whose final
// outbound is its client; it returns switchyard's SOCKS address and the
// server's port.
func xhStart(t *testing.T, protocol string, c xhCase) (proxy string, port int) {
	t.Helper()
	var cert, key string
	if c.tls {
		cert, key = tlsFiles(t)
	}
	port = freePort(t)
	if c.h3 {
		// Xray's HTTP/3 inbound listens on UDP alone.
		startPeer(t, "xray", xhXrayConfigALPN(protocol, port, cert, key, `["h3"]`), 0)
	} else {
		startPeer(t, "xray", xhXrayConfig(protocol, port, cert, key), port)
	}
	return startSwitchyard(t, xhOutbound(protocol, c, port, cert), "proxy"), port
}

func runXHCase(t *testing.T, protocol string, c xhCase) {
	t.Helper()
	proxy, _ := xhStart(t, protocol, c)
	t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
	t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
}

func TestXHTTPVLESSInterop(t *testing.T) {
	for _, c := range xhCases {
		t.Run("xray/"+c.name, func(t *testing.T) { runXHCase(t, "vless", c) })
	}
}

func TestXHTTPVMessTrojanInterop(t *testing.T) {
	t.Run("xray/vmess/stream-up", func(t *testing.T) { runXHCase(t, "vmess", xhCase{name: "stream-up", mode: "stream-up"}) })
	t.Run("xray/trojan/stream-one+tls", func(t *testing.T) {
		runXHCase(t, "trojan", xhCase{name: "stream-one+tls", mode: "stream-one", tls: true})
	})
}

// Several flows at once, each on its own HTTP/2 connection (Xray's client
// default), each get their own bytes back.
func TestXHTTPConcurrentFlowsInterop(t *testing.T) {
	for _, c := range []xhCase{{name: "packet-up+tls", mode: "packet-up", tls: true}, {name: "stream-up", mode: "stream-up"}} {
		t.Run("xray/"+c.name, func(t *testing.T) {
			proxy, _ := xhStart(t, "vless", c)
			echo := tcpEcho(t)
			errc := make(chan error, 8)
			for i := range 8 {
				go func() { errc <- echoOnce(proxy, echo, i) }()
			}
			for range 8 {
				if err := <-errc; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// xmux against Xray's server: flows share HTTP/2 connections as the table
// says (max_concurrency 4: 8 flows on 2 connections; max_connections 2: on
// 2), each flow keeps its own bytes, and UDP rides as well.
func TestXHTTPXMuxInterop(t *testing.T) {
	for _, tc := range []struct {
		c    xhCase
		want int // connections to the server for 8 flows at once
	}{
		{xhCase{name: "stream-up/default", mode: "stream-up"}, 8},
		{xhCase{name: "stream-up/max_concurrency", mode: "stream-up", xmux: "max_concurrency = 4"}, 2},
		{xhCase{name: "packet-up+tls/max_connections", mode: "packet-up", tls: true, xmux: `max_connections = "2"`}, 2},
		{xhCase{name: "stream-one+tls/max_concurrency", mode: "stream-one", tls: true, xmux: `max_concurrency = "4-4", h_keep_alive_period = 10`}, 2},
	} {
		t.Run("xray/"+tc.c.name, func(t *testing.T) {
			proxy, port := xhStart(t, "vless", tc.c)
			echo := tcpEcho(t)
			var flows []net.Conn
			defer func() {
				for _, c := range flows {
					c.Close()
				}
			}()
			for i := range 8 {
				c, err := socksclient.Dial(proxy, echo, "", "")
				if err != nil {
					t.Fatalf("flow %d: CONNECT: %v", i, err)
				}
				flows = append(flows, c)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				msg := []byte(fmt.Sprintf("flow %d", i))
				if _, err := c.Write(msg); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
					t.Fatalf("flow %d: echo %q, %v", i, got, err)
				}
			}
			// A preconnected connection the first flow did not take may
			// be one more.
			if n := establishedTo(t, port); n < tc.want || n > tc.want+1 {
				t.Errorf("%d connections to the server for 8 flows at once, want %d", n, tc.want)
			}
			errc := make(chan error, 8)
			for i := range 8 {
				go func() { errc <- echoOnce(proxy, echo, i) }()
			}
			for range 8 {
				if err := <-errc; err != nil {
					t.Error(err)
				}
			}
			checkUDP(t, proxy, 2)
		})
	}
}

// The download settings against Xray's server: the download takes its
// own path to the server (here a TCP relay of the test's to the same
// inbound), the upload the outbound's; the echo and UDP work, and the
// relay carried every flow's download.
func TestXHTTPDownloadSettingsInterop(t *testing.T) {
	for _, c := range []xhCase{
		{name: "stream-up", mode: "stream-up"},
		{name: "packet-up/http1.1", mode: "packet-up"},
		{name: "packet-up+tls", mode: "packet-up", tls: true},
		{name: "stream-up+tls", mode: "stream-up", tls: true},
	} {
		t.Run("xray/"+c.name, func(t *testing.T) {
			var cert, key string
			if c.tls {
				cert, key = tlsFiles(t)
			}
			port := freePort(t)
			startPeer(t, "xray", xhXrayConfig("vless", port, cert, key), port)
			relay, st := tcpRelay(t, port)
			c.download = relay
			proxy := startSwitchyard(t, xhOutbound("vless", c, port, cert), "proxy")
			checkTCP(t, proxy)
			checkUDP(t, proxy, 2)
			// The 1 MiB echo came back over the relay; what went out
			// over it is the GETs alone.
			if up, down := st.up.Load(), st.down.Load(); down < 1<<20 || up > 256<<10 {
				t.Errorf("the download's path carried %d bytes to the server and %d from it; want the echo's MiB from it, the upload elsewhere", up, down)
			}
		})
	}
}

// relayStats counts the bytes a tcpRelay carried each way.
type relayStats struct{ up, down atomic.Int64 }

// tcpRelay relays the TCP connections it accepts to 127.0.0.1:to, counting
// their bytes, until the test ends; it returns its port.
func tcpRelay(t *testing.T, to int) (int, *relayStats) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := new(relayStats)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", to))
			if err != nil {
				a.Close()
				continue
			}
			mu.Lock()
			open = append(open, a, b)
			mu.Unlock()
			wg.Go(func() { io.Copy(countingWriter{b, &st.up}, a); b.(*net.TCPConn).CloseWrite() })
			wg.Go(func() { io.Copy(countingWriter{a, &st.down}, b); a.(*net.TCPConn).CloseWrite() })
		}
	})
	return ln.Addr().(*net.TCPAddr).Port, st
}

// countingWriter counts what it writes to w in n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}

// establishedTo counts the established TCP connections on this machine to
// 127.0.0.1:port (the client ends: their remote port is port).
func establishedTo(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	remote := fmt.Sprintf("0100007F:%04X", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == remote && f[3] == "01" {
			n++
		}
	}
	return n
}

// echoOnce sends 256 KiB of flow i's own bytes through the proxy to echo
// and requires them back.
func echoOnce(proxy, echo string, i int) error {
	c, err := socksclient.Dial(proxy, echo, "", "")
	if err != nil {
		return fmt.Errorf("flow %d: CONNECT: %v", i, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	payload := bytes.Repeat([]byte{byte(i), byte(i * 7), 0xa5}, 256<<10/3)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(payload); errc <- err }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("flow %d: reading the echo: %v", i, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("flow %d: writing: %v", i, err)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("flow %d: the echo differs", i)
	}
	return nil
}

// A server that accepts TCP and never answers fails the flow within the
// establishment deadline: the SOCKS CONNECT gets its failure reply.
func TestXHTTPSilentServerInterop(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, mode := range []string{"stream-one", "packet-up"} {
		t.Run(mode, func(t *testing.T) {
			out := fmt.Sprintf("[dial]\nconnect_timeout = \"1s\"\n\n%s", xhOutbound("vless", xhCase{mode: mode}, port, ""))
			proxy := startSwitchyard(t, out, "proxy")
			start := time.Now()
			c, err := socksclient.DialWithin(proxy, "127.0.0.1:9", "", "", 20*time.Second)
			took := time.Since(start)
			if err == nil {
				c.Close()
				t.Fatal("a flow through a silent server was connected")
			}
			var reply socksclient.ReplyError
			if !errors.As(err, &reply) {
				t.Fatalf("no SOCKS failure reply: %v", err)
			}
			// The whole dial gets max(10s, 4 × connect_timeout).
			if took > 12*time.Second {
				t.Fatalf("the flow failed after %v, past the establishment deadline", took)
			}
			t.Logf("failed after %v: %v", took, err)
		})
	}
}
