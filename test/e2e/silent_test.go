package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// silentTCP accepts connections and never answers; it reports how many it
// holds open.
type silentTCP struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	ended chan struct{} // one send per connection the client side closed
}

func newSilentTCP(t *testing.T) *silentTCP {
	s := &silentTCP{ln: listenTCP(t), ended: make(chan struct{}, 1024)}
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				io.Copy(io.Discard, c) // reads what comes, answers nothing
				s.ended <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *silentTCP) addr() string { return s.ln.Addr().String() }

// silentUDP reads datagrams and never answers.
func silentUDP(t *testing.T) string {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 65536)
		for {
			if _, _, err := c.ReadFrom(b); err != nil {
				return
			}
		}
	}()
	return c.LocalAddr().String()
}

func key32() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// silentOutbounds is one outbound per proxy client and transport, each
// pointed at a server that accepts and never answers, with the port of the
// destination that routes to it.
func silentOutbounds(tcp, udp string) (config string, ports map[string]int) {
	const uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
	tls := `tls = { server_name = "silent.test", verify = "insecure" }`
	outs := []struct{ tag, body string }{
		{"socks", `type = "socks"` + "\n" + `server = "` + tcp + `"`},
		{"http", `type = "http"` + "\n" + `server = "` + tcp + `"`},
		{"socks-tls", `type = "socks"` + "\n" + `server = "` + tcp + `"` + "\n" + tls},
		{"trojan-tls", `type = "trojan"` + "\n" + `server = "` + tcp + `"` + "\n" + `password = "p"` + "\n" + tls},
		{"vless-utls", `type = "vless"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `tls = { server_name = "silent.test", verify = "insecure", fingerprint = "chrome" }`},
		{"vless-ws", `type = "vless"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "ws", path = "/ws" }`},
		{"vmess-httpupgrade", `type = "vmess"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "httpupgrade", path = "/up" }`},
		{"vmess-grpc-h2c", `type = "vmess"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "grpc", service_name = "g" }`},
		{"vless-grpc", `type = "vless"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "grpc", service_name = "g" }` + "\n" + tls},
		{"vless-xhttp", `type = "vless"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "xhttp", mode = "stream-one" }`},
		{"trojan-xhttp-tls", `type = "trojan"` + "\n" + `server = "` + tcp + `"` + "\n" + `password = "p"` + "\n" + `transport = { type = "xhttp", mode = "packet-up" }` + "\n" + tls},
		{"vmess-xhttp-h1", `type = "vmess"` + "\n" + `server = "` + tcp + `"` + "\n" + `uuid = "` + uuid + `"` + "\n" + `transport = { type = "xhttp", mode = "packet-up" }`},
		{"ss-ws", `type = "shadowsocks"` + "\n" + `server = "` + tcp + `"` + "\n" + `method = "aes-128-gcm"` + "\n" + `password = "p"` + "\n" + `transport = { type = "ws", path = "/ss" }`},
		{"hysteria2", `type = "hysteria2"` + "\n" + `server = "` + udp + `"` + "\n" + `password = "p"` + "\n" + `tls = { server_name = "silent.test", verify = "insecure" }`},
		{"wireguard", `type = "wireguard"` + "\n" + `endpoint = "` + udp + `"` + "\n" + `private_key = "` + key32() + `"` + "\n" + `peer_public_key = "` + key32() + `"` + "\n" + `addresses = ["10.7.0.2/32"]`},
	}
	var b strings.Builder
	ports = map[string]int{}
	for i, o := range outs {
		port := 20001 + i
		ports[o.tag] = port
		fmt.Fprintf(&b, "[[outbounds]]\ntag = %q\n%s\n\n", o.tag, o.body)
		fmt.Fprintf(&b, "[[rules]]\nport = [%d]\noutbound = %q\n\n", port, o.tag)
	}
	return b.String(), ports
}

// A proxy server that accepts and then says nothing cannot hold a flow: for
// every proxy client and transport the SOCKS5 client gets its failure reply
// within the establishment deadline (max(10s, 4 × 1s)), the log names the
// outbound, the phase and the deadline, an HTTP client gets 504, and the
// process's goroutines return to their level.
func TestASilentServerGetsAFailureReplyWithinTheDeadline(t *testing.T) {
	t.Parallel()
	tcp := newSilentTCP(t)
	outs, ports := silentOutbounds(tcp.addr(), silentUDP(t))
	p := start(t, `
[log]
level = "info"
[dial]
connect_timeout = "1s"
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[inbounds]]
tag = "http-in"
type = "http"
listen = "127.0.0.1:0"
`+outs+`
[[outbounds]]
tag = "direct"
type = "direct"
[route]
final = "direct"
`)
	round := func() {
		const deadline = 10 * time.Second
		var wg sync.WaitGroup
		for tag, port := range ports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				c, err := socksclient.DialWithin(p.addr("socks-in"), fmt.Sprintf("127.0.0.1:%d", port), "", "", deadline+5*time.Second)
				took := time.Since(start)
				if err == nil {
					c.Close()
					t.Errorf("%s: a silent server's flow was answered as connected", tag)
					return
				}
				var re socksclient.ReplyError
				if !errors.As(err, &re) {
					t.Errorf("%s: no SOCKS5 failure reply: %v", tag, err)
				}
				if took > deadline+3*time.Second {
					t.Errorf("%s: the failure reply came after %v", tag, took)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", p.addr("http-in"))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", ports["socks"])
			c.SetReadDeadline(time.Now().Add(deadline + 3*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("http: no answer: %v", err)
				return
			}
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Errorf("http: %s, want 504", resp.Status)
			}
		}()
		wg.Wait()
	}
	// The first round brings up what outbounds keep between flows (the
	// WireGuard tunnel); the second must leave nothing more behind.
	round()
	time.Sleep(200 * time.Millisecond)
	before, _ := p.stats()
	round()

	for _, tag := range []string{"socks", "http", "socks-tls", "trojan-tls", "vless-utls", "vless-ws", "vmess-httpupgrade", "vmess-grpc-h2c", "vless-grpc", "ss-ws", "vless-xhttp", "trojan-xhttp-tls", "vmess-xhttp-h1"} {
		p.waitLog(`outbound=`+tag+`@v1`, 2, 5*time.Second)
	}
	logs := p.logs.String()
	for _, want := range []string{
		`dial timed out`, `outbound=socks@v1`, `phase="protocol handshake"`, `phase="tls handshake"`,
		`phase="transport handshake"`, `deadline=10s`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not show %s:\n%s", want, logs)
		}
	}
	waitGoroutines(t, p, before)
}

// A client that leaves while its dial waits on a silent server ends that
// dial at once: the proxy's connection to the server closes long before the
// deadline.
func TestADialEndsWhenItsClientLeaves(t *testing.T) {
	t.Parallel()
	tcp := newSilentTCP(t)
	p := start(t, `
[dial]
connect_timeout = "10s"
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[inbounds]]
tag = "http-in"
type = "http"
listen = "127.0.0.1:0"
[[outbounds]]
tag = "up"
type = "socks"
server = "`+tcp.addr()+`"
[route]
final = "up"
`)
	before, _ := p.stats()
	const clients = 20
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := range clients {
		c, err := net.Dial("tcp", p.addr("socks-in"))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			c.Write([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80}) // greeting and CONNECT at once
		} else {
			c.Close()
			c, err = net.Dial("tcp", p.addr("http-in"))
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: x\r\n\r\n"))
		}
		cs = append(cs, c)
	}
	// Every dial reached the silent server; now every client leaves.
	waitFor(t, 5*time.Second, func() bool {
		tcp.mu.Lock()
		defer tcp.mu.Unlock()
		return len(tcp.conns) >= clients
	})
	start := time.Now()
	for _, c := range cs {
		c.Close()
	}
	for range clients {
		select {
		case <-tcp.ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("a dial outlived its client by %v (deadline 40s)", time.Since(start))
		}
	}
	waitGoroutines(t, p, before)
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGoroutines waits for the process's goroutine count to come back to
// within a few of before.
func waitGoroutines(t *testing.T, p *proc, before int) {
	t.Helper()
	var now int
	for range 50 {
		if now, _ = p.stats(); now <= before+3 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("goroutines %d, %d before", now, before)
}
