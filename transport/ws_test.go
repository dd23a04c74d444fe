package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/spec"
)

func decodeEarly(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func wsOutbound(server netip.AddrPort, tr spec.Transport, t *spec.TLS) spec.Outbound {
	tr.Type = "ws"
	return spec.Outbound{Server: server.String(), Transport: tr, TLS: t}
}

// echoRoundTrip writes each size and requires it back.
func echoRoundTrip(t *testing.T, c net.Conn, sizes ...int) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	for _, n := range sizes {
		msg := make([]byte, n)
		rand.Read(msg)
		errc := make(chan error, 1)
		go func() { _, err := c.Write(msg); errc <- err }()
		got := make([]byte, n)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("reading %d bytes back: %v", n, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("writing %d bytes: %v", n, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes came back different", n)
		}
	}
}

func TestWSEcho(t *testing.T) {
	p := newPKI(t)
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[withTLS]
		t.Run(name, func(t *testing.T) {
			var seen wsRequests
			var srvTLS *tls.Config
			var cliTLS *spec.TLS
			if withTLS {
				srvTLS = p.serverConfig(tls.VersionTLS12, tls.VersionTLS13)
				cliTLS = &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: []string{"h2"}}
			}
			server := wsEchoServer(t, srvTLS, "", &seen)
			o := wsOutbound(server, spec.Transport{Path: "tunnel/ws?x=1", Headers: map[string]string{"X-Test": "yes"}}, cliTLS)
			c, err := dial(t, o, deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, ok := c.(*wsConn); !ok {
				t.Fatalf("ws transport gave a %T", c)
			}
			echoRoundTrip(t, c, 1, 125, 126, 65535, 65536, 200_000)
			r := seen.last(t)
			wantHost := "127.0.0.1"
			if withTLS {
				wantHost = serverName // from tls.server_name
				if r.TLS.NegotiatedProtocol != "http/1.1" {
					t.Errorf("ALPN %q: ws must run on http/1.1 whatever the table says", r.TLS.NegotiatedProtocol)
				}
			}
			if r.URL.RequestURI() != "/tunnel/ws?x=1" || r.Host != wantHost || r.Header.Get("X-Test") != "yes" || r.Header.Get("User-Agent") != DefaultUserAgent {
				t.Errorf("request %s, Host %q, X-Test %q, UA %q", r.URL.RequestURI(), r.Host, r.Header.Get("X-Test"), r.Header.Get("User-Agent"))
			}
			if r.Header.Get("Sec-WebSocket-Protocol") != "" {
				t.Errorf("early data header sent without early data")
			}
		})
	}
}

func TestWSEarlyData(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tr         spec.Transport
		first      int // size of the first Write
		wantEarly  int
		wantURI    string
		headerName string
	}{
		{"fits", spec.Transport{Path: "/ed", MaxEarlyData: 64}, 40, 40, "/ed", ""},
		{"longer than the limit", spec.Transport{Path: "/ed", MaxEarlyData: 64}, 1000, 64, "/ed", ""},
		{"path form", spec.Transport{Path: "/ed?ed=32&x=1"}, 100, 32, "/ed?x=1", ""},
		{"own header", spec.Transport{Path: "/", MaxEarlyData: 16, EarlyDataHeader: "X-Early"}, 10, 10, "/", "X-Early"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen wsRequests
			server := wsEchoServer(t, nil, tc.headerName, &seen)
			c, err := dial(t, wsOutbound(server, tc.tr, nil), deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, ok := c.(*earlyConn); !ok {
				t.Fatalf("early-data ws gave a %T", c)
			}
			first := make([]byte, tc.first)
			rand.Read(first)
			if n, err := c.Write(first); n != len(first) || err != nil {
				t.Fatalf("first write: %d, %v", n, err)
			}
			got := make([]byte, len(first))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, first) {
				t.Fatalf("echo of the first write: %v", err)
			}
			r := seen.last(t)
			name := tc.headerName
			if name == "" {
				name = DefaultEarlyDataHeader
			}
			early, err := decodeEarly(r.Header.Get(name))
			if err != nil || !bytes.Equal(early, first[:tc.wantEarly]) {
				t.Fatalf("early data in %s: %d bytes (%v), want the first %d", name, len(early), err, tc.wantEarly)
			}
			if r.URL.RequestURI() != tc.wantURI {
				t.Fatalf("request %s, want %s", r.URL.RequestURI(), tc.wantURI)
			}
			echoRoundTrip(t, c, 1, 5000)
		})
	}
}

// Without a Write first, a Read or the short timer upgrades without data.
func TestWSEarlyDataWithoutWrite(t *testing.T) {
	greet := []byte("server speaks first")
	server := rawWSServer(t, func(c net.Conn, br *bufio.Reader) {
		c.Write(serverFrame(opBinary, greet))
		io.Copy(io.Discard, br)
	})
	for _, how := range []string{"read", "timer"} {
		t.Run(how, func(t *testing.T) {
			c, err := dial(t, wsOutbound(server, spec.Transport{MaxEarlyData: 100}, nil), deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if how == "timer" {
				time.Sleep(earlyWait + 100*time.Millisecond)
				e := c.(*earlyConn)
				e.mu.Lock()
				state := e.state
				e.mu.Unlock()
				if state != earlyDone {
					t.Fatalf("state %d after the early-data wait", state)
				}
			}
			got := make([]byte, len(greet))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, greet) {
				t.Fatalf("greeting %q, %v", got, err)
			}
		})
	}
}

// serverFrame is an unmasked server frame.
func serverFrame(opcode byte, payload []byte) []byte {
	b := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 65535:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, payload...)
}

// readClientFrame reads one masked client frame.
func readClientFrame(br *bufio.Reader) (opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 == 0 {
		return 0, nil, errors.New("client frame not masked")
	}
	n := int(h[1] & 0x7F)
	switch n {
	case 126:
		var l [2]byte
		io.ReadFull(br, l[:])
		n = int(l[0])<<8 | int(l[1])
	case 127:
		var l [8]byte
		io.ReadFull(br, l[:])
		n = 0
		for _, b := range l {
			n = n<<8 | int(b)
		}
	}
	var key [4]byte
	if _, err := io.ReadFull(br, key[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		return 0, nil, err
	}
	for i := range payload {
		payload[i] ^= key[i&3]
	}
	return h[0] & 0x0F, payload, nil
}

// Pings are answered with pongs, fragmented and empty frames are payload,
// a close frame ends the stream with EOF and is echoed, and Close sends
// 1000.
func TestWSControlFrames(t *testing.T) {
	events := make(chan string, 8)
	server := rawWSServer(t, func(c net.Conn, br *bufio.Reader) {
		c.Write(serverFrame(opPing, []byte("ping-1")))
		op, p, err := readClientFrame(br)
		if err != nil || op != opPong || string(p) != "ping-1" {
			events <- "no pong"
			return
		}
		c.Write([]byte{opBinary, 3, 'a', 'b', 'c'}) // a first fragment
		c.Write([]byte{opContinuation, 0})          // an empty middle one
		c.Write(serverFrame(opContinuation, []byte("def")))
		c.Write(serverFrame(opPong, []byte("unasked")))
		c.Write(serverFrame(opClose, []byte{0x03, 0xE8, 'b', 'y', 'e'}))
		op, p, err = readClientFrame(br)
		if err != nil || op != opClose || !bytes.Equal(p, []byte{0x03, 0xE8}) {
			events <- "close not echoed"
			return
		}
		events <- "ok"
	})
	c, err := dial(t, wsOutbound(server, spec.Transport{}, nil), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "abcdef" {
		t.Fatalf("read %q, %v", got, err)
	}
	if ev := <-events; ev != "ok" {
		t.Fatal(ev)
	}
	c.Close()

	closed := make(chan []byte, 1)
	server = rawWSServer(t, func(c net.Conn, br *bufio.Reader) {
		op, p, err := readClientFrame(br)
		if err == nil && op == opClose {
			closed <- p
		}
		close(closed)
	})
	c, err = dial(t, wsOutbound(server, spec.Transport{}, nil), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if p := <-closed; !bytes.Equal(p, []byte{0x03, 0xE8}) {
		t.Fatalf("close frame payload %v, want status 1000", p)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("write after Close")
	}
}

// A Read waits for the first payload byte, then takes every frame already
// received as far as its buffer has room, however small the frames: over
// plain TCP, and over TLS with each frame (or a piece of one) a record of
// its own. A ping among them is answered; a close frame after them ends
// the stream only once their payload is read.
func TestWSReadTakesWhatWasReceived(t *testing.T) {
	p := newPKI(t)
	for _, withTLS := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[withTLS]
		t.Run(name, func(t *testing.T) {
			var srvTLS *tls.Config
			var cliTLS *spec.TLS
			if withTLS {
				srvTLS = p.serverConfig(tls.VersionTLS13, tls.VersionTLS13)
				cliTLS = &spec.TLS{ServerName: serverName, CAFile: p.caFile}
			}
			var want []byte
			for i := range 40 {
				want = append(want, bytes.Repeat([]byte{byte('a' + i%26)}, 100)...)
			}
			big := bytes.Repeat([]byte("0123456789"), 300)
			want = append(want, big...)
			sent := make(chan struct{})
			pong := make(chan string, 1)
			server := rawWSServerOver(t, srvTLS, func(c net.Conn, br *bufio.Reader) {
				for i := range 40 {
					if i == 20 {
						c.Write(serverFrame(opPing, []byte("mid")))
					}
					c.Write(serverFrame(opBinary, want[i*100:(i+1)*100]))
				}
				f := serverFrame(opBinary, big)
				c.Write(f[:3])     // inside the header
				c.Write(f[3:1000]) // inside the payload
				c.Write(f[1000:])
				c.Write(serverFrame(opClose, []byte{0x03, 0xE8}))
				close(sent)
				op, p, err := readClientFrame(br)
				if err != nil || op != opPong {
					pong <- "no pong"
					return
				}
				pong <- string(p)
				io.Copy(io.Discard, br)
			})
			c, err := dial(t, wsOutbound(server, spec.Transport{}, cliTLS), deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			<-sent
			time.Sleep(100 * time.Millisecond) // loopback: all of it is here
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 64<<10)
			n, err := c.Read(buf)
			if err != nil || !bytes.Equal(buf[:n], want) {
				t.Fatalf("one Read took %d of the %d bytes received (%v)", n, len(want), err)
			}
			if got := <-pong; got != "mid" {
				t.Fatalf("the ping among the frames: %s", got)
			}
			if n, err := c.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("after the close frame: %d, %v", n, err)
			}
		})
	}
}

// A read deadline that fires inside a frame header or payload loses
// nothing: the next Read goes on.
func TestWSReadDeadlineKeepsTheFrame(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 30)
	frame := serverFrame(opBinary, payload)
	go1 := make(chan struct{})
	go2 := make(chan struct{})
	server := rawWSServer(t, func(c net.Conn, br *bufio.Reader) {
		c.Write(frame[:1])
		<-go1
		c.Write(frame[1:100])
		<-go2
		c.Write(frame[100:])
		io.Copy(io.Discard, br)
	})
	c, err := dial(t, wsOutbound(server, spec.Transport{}, nil), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1000)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("inside the header: %v", err)
	}
	close(go1)
	var got []byte
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < 90 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	close(go2)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len(payload) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload differs across deadlines")
	}
}

// A server frame that breaks RFC 6455 fails the flow with a clear error.
func TestWSBadServerFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  error
	}{
		{"masked", []byte{0x82, 0x81, 1, 2, 3, 4, 'x'}, errWSMasked},
		{"reserved bits", []byte{0xC2, 0x01, 'x'}, errWSReserved},
		{"unknown opcode", []byte{0x83, 0x00}, errWSOpcode},
		{"fragmented ping", []byte{0x09, 0x00}, errWSControl},
		{"long ping", append([]byte{0x89, 126, 0, 200}, make([]byte, 200)...), errWSControl},
		{"huge length", []byte{0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, errWSFrameRange},
		{"closed inside a frame", []byte{0x82, 0x05, 'a', 'b'}, errWSInsideFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := rawWSServer(t, func(c net.Conn, br *bufio.Reader) { c.Write(tc.bytes) })
			c, err := dial(t, wsOutbound(server, spec.Transport{}, nil), deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadAll(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if _, err2 := c.Read(make([]byte, 1)); !errors.Is(err2, tc.want) {
				t.Fatalf("the error is not final: %v", err2)
			}
		})
	}
}

// A refused upgrade is a dial error; with early data, an error of the
// first Write, which carries the upgrade.
func TestWSRefused(t *testing.T) {
	server := serveHTTP(t, nil, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	if _, err := dial(t, wsOutbound(server, spec.Transport{}, nil), deps(nil)); err == nil || !strings.Contains(err.Error(), `the server answered "403 Forbidden"`) {
		t.Fatalf("dial: %v", err)
	}
	c, err := dial(t, wsOutbound(server, spec.Transport{MaxEarlyData: 10}, nil), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("header")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("first write: %v", err)
	}

	wrongAccept := accept(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: bogus\r\n\r\n"))
	})
	if _, err := dial(t, wsOutbound(wrongAccept, spec.Transport{}, nil), deps(nil)); err == nil || !strings.Contains(err.Error(), "Sec-WebSocket-Accept") {
		t.Fatalf("a wrong accept key: %v", err)
	}
}

// The upgrade is bound by the dial's context.
func TestWSHandshakeHonoursContext(t *testing.T) {
	silent := accept(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	d, err := New(wsOutbound(silent, spec.Transport{}, nil), deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := d.Dial(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the upgrade outlived its context")
	}
}
