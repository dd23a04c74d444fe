package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

func xhOutbound(server netip.AddrPort, tr spec.Transport, tlsTable *spec.TLS) spec.Outbound {
	tr.Type = "xhttp"
	if tr.Path == "" {
		tr.Path = "/xh"
	}
	return spec.Outbound{Server: server.String(), Transport: tr, TLS: tlsTable}
}

// xhEcho sends n random bytes through c, in writes of at most chunk, and
// requires them back.
func xhEcho(t *testing.T, c net.Conn, n, chunk int) {
	t.Helper()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	defer c.SetDeadline(time.Time{})
	payload := make([]byte, n)
	rand.Read(payload)
	errc := make(chan error, 1)
	go func() {
		for p := payload; len(p) > 0; {
			k := min(len(p), chunk)
			if _, err := c.Write(p[:k]); err != nil {
				errc <- err
				return
			}
			p = p[k:]
		}
		errc <- nil
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the echo differs")
	}
}

// xhFlow dials a flow as the outbounds do, under an establishment (which
// an idle connection serves).
func xhFlow(t *testing.T, d *Dialer) net.Conn {
	t.Helper()
	e, ctx, cancel := netx.Begin(context.Background(), nil, 5*time.Second)
	defer cancel()
	defer e.End()
	c, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestXHTTPModesEcho(t *testing.T) {
	p := newPKI(t)
	for _, c := range []struct {
		name string
		mode string
		tls  bool
		alpn []string
	}{
		{"stream-one/h2c", "stream-one", false, nil},
		{"stream-one/h2", "stream-one", true, nil},
		{"stream-up/h2c", "stream-up", false, nil},
		{"stream-up/h2", "stream-up", true, nil},
		{"packet-up/http1.1", "packet-up", false, nil},
		{"packet-up/h2", "packet-up", true, nil},
		{"packet-up/http1.1+tls", "packet-up", true, []string{"http/1.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg *tls.Config
			var tt *spec.TLS
			if c.tls {
				cfg = p.serverConfig(tls.VersionTLS12, tls.VersionTLS13)
				tt = &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: c.alpn}
			}
			s := newXHServer(t, cfg)
			d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: c.mode, MinPostsInterval: time.Millisecond}, tt))
			conn := dialCtx(t, d)
			defer conn.Close()
			xhEcho(t, conn, 1<<20, 20000)
			// Only packet-up cannot tell the server that the upload ended.
			err := conn.(interface{ CloseWrite() error }).CloseWrite()
			if unsignalled := c.mode == "packet-up"; errors.Is(err, netx.ErrEndUnsignalled) != unsignalled || !unsignalled && err != nil {
				t.Fatalf("CloseWrite: %v", err)
			}
			s.check(t)
		})
	}
}

// Packet-up numbers its POSTs 0, 1, 2... without a gap or a repeat, each
// within sc_max_each_post_bytes and sc_min_posts_interval_ms after the
// one before; POSTs the server holds back are overtaken by later ones,
// and the upload still arrives whole and in order.
func TestXHTTPPacketUpSequencing(t *testing.T) {
	p := newPKI(t)
	s := newXHServer(t, p.serverConfig(tls.VersionTLS12, tls.VersionTLS13))
	s.delay = func(seq uint64) time.Duration {
		if seq%3 == 1 {
			return 40 * time.Millisecond
		}
		return 0
	}
	const maxPost, interval = 3000, 5 * time.Millisecond
	tt := &spec.TLS{ServerName: serverName, CAFile: p.caFile}
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "packet-up", MaxEachPostBytes: maxPost, MinPostsInterval: interval}, tt))
	conn := dialCtx(t, d)
	defer conn.Close()
	xhEcho(t, conn, 200_000, 1000)
	s.check(t)

	s.mu.Lock()
	posts := append([]xhPost(nil), s.posts...)
	s.mu.Unlock()
	if len(posts) < 200_000/maxPost {
		t.Fatalf("%d POSTs for 200000 bytes of at most %d each", len(posts), maxPost)
	}
	seen := map[uint64]bool{}
	overtaken := 0
	var maxSeq uint64
	for i, po := range posts {
		if seen[po.seq] {
			t.Fatalf("seq %d sent twice", po.seq)
		}
		seen[po.seq] = true
		maxSeq = max(maxSeq, po.seq)
		if po.size == 0 || po.size > maxPost {
			t.Fatalf("POST %d carries %d bytes (1..%d)", po.seq, po.size, maxPost)
		}
		if i > 0 && po.seq < posts[i-1].seq {
			overtaken++
		}
	}
	if int(maxSeq)+1 != len(posts) {
		t.Fatalf("seqs 0..%d over %d POSTs: a gap", maxSeq, len(posts))
	}
	if overtaken == 0 {
		t.Fatal("no POST arrived after a later one: the reordering went untested")
	}
	// The POSTs start at least the interval apart: the n-th no sooner
	// than (n-1) intervals after the first.
	first, last := posts[0].at, posts[0].at
	for _, po := range posts {
		if po.at.Before(first) {
			first = po.at
		}
		if po.at.After(last) {
			last = po.at
		}
	}
	if span, least := last.Sub(first), time.Duration(len(posts)-2)*interval; span < least {
		t.Fatalf("%d POSTs within %v, under %v at one per %v", len(posts), span, least, interval)
	}
}

// Packet-up's second POST, the first bytes after a proxy's request header
// that the dial wrote alone, goes without waiting the interval; the third
// waits it.
func TestXHTTPPacketUpSecondPostDoesNotWait(t *testing.T) {
	p := newPKI(t)
	s := newXHServer(t, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
	const interval = 2 * time.Second
	tt := &spec.TLS{ServerName: serverName, CAFile: p.caFile}
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "packet-up", MinPostsInterval: interval}, tt))
	conn := dialCtx(t, d)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	posted := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			s.mu.Lock()
			k := len(s.posts)
			s.mu.Unlock()
			if k >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d POSTs, waiting for %d", k, n)
			}
		}
	}
	echo := func(b string) {
		t.Helper()
		if _, err := conn.Write([]byte(b)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(b))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != b {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	echo("header")
	posted(1)
	echo("first bytes")
	echo("then more")
	posted(3)
	s.check(t)
	s.mu.Lock()
	posts := append([]xhPost(nil), s.posts...)
	s.mu.Unlock()
	if gap := posts[1].at.Sub(posts[0].at); gap >= interval {
		t.Errorf("the second POST came %v after the first: it waited the interval", gap)
	}
	if gap := posts[2].at.Sub(posts[1].at); gap < interval-50*time.Millisecond {
		t.Errorf("the third POST came %v after the second, under the interval %v", gap, interval)
	}
}

// Every request carries x_padding_bytes "X"s in its Referer's query, a
// fresh length within the range each time.
func TestXHTTPPadding(t *testing.T) {
	x, err := newXHTTPConfig(spec.Transport{Type: "xhttp", Path: "/p?ed=1", XPaddingMin: 5, XPaddingMax: 8}, "h.test", true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 2000 {
		req := x.request(context.Background(), http.MethodGet, "sess")
		if req.URL.String() != "https://h.test/p/sess?ed=1" {
			t.Fatalf("request URL %s", req.URL)
		}
		ref, err := url.Parse(req.Header.Get("Referer"))
		if err != nil || ref.Host != "h.test" || ref.Path != "/p/" {
			t.Fatalf("Referer %q", req.Header.Get("Referer"))
		}
		pad := ref.Query().Get("x_padding")
		if len(pad) < 5 || len(pad) > 8 || strings.Trim(pad, "X") != "" {
			t.Fatalf("x_padding %q", pad)
		}
		seen[len(pad)] = true
	}
	if len(seen) != 4 {
		t.Fatalf("padding lengths %v: not every one of 5..8", seen)
	}

	// Over the wire, against a server that checks the default range.
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up"}, nil))
	conn := dialCtx(t, d)
	xhEcho(t, conn, 1000, 1000)
	conn.Close()
	s.check(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.paddings {
		if n < 100 || n > 1000 {
			t.Fatalf("a padding of %d bytes, outside the default 100..1000", n)
		}
	}
	if len(s.paddings) < 2 {
		t.Fatalf("%d padded requests for a stream-up flow (GET and POST)", len(s.paddings))
	}
}

// Over HTTP/2, as Xray's client by default, a connection carries one flow
// at a time: concurrent flows have their own connections, and a flow after
// another reuses the connection the other left.
func TestXHTTPReusesConnections(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	for range 3 {
		c := xhFlow(t, d)
		xhEcho(t, c, 5000, 5000)
		c.Close()
	}
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections for 3 flows one after the other, want 1", n)
	}
	var conns []net.Conn
	for range 3 {
		c := xhFlow(t, d)
		xhEcho(t, c, 5000, 5000)
		conns = append(conns, c)
	}
	if n := s.accepts.Load(); n != 3 {
		t.Fatalf("%d connections for 3 flows at once, want 3", n)
	}
	for _, c := range conns {
		c.Close()
	}
	if w := d.Warmth(); w.Kind != WarmPool || w.Pooled != 3 {
		t.Fatalf("warmth %+v after every flow closed; want the 3 connections idle", w)
	}
	d.Purge()
	if d.xhttp.idleCount() != 0 {
		t.Fatal("Purge kept idle connections")
	}
	c := xhFlow(t, d)
	xhEcho(t, c, 5000, 5000)
	c.Close()
	if n := s.accepts.Load(); n != 4 {
		t.Fatalf("%d connections after a purge and a flow, want 4", n)
	}
	// A dial outside an establishment (a health probe) measures the path:
	// it connects afresh and leaves the idle connection to flows.
	probe := dialCtx(t, d)
	probe.Close()
	if n := s.accepts.Load(); n != 5 {
		t.Fatalf("%d connections after a probe, want 5", n)
	}
}

// A connection serves a bounded number of requests, then the next flow
// connects afresh.
func TestXHTTPReuseBound(t *testing.T) {
	defer func(r [2]int64) { xhReuseRequests = r }(xhReuseRequests)
	xhReuseRequests = [2]int64{3, 3}
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up"}, nil))
	for range 3 {
		c := xhFlow(t, d)
		xhEcho(t, c, 100, 100)
		c.Close()
	}
	// stream-up takes 2 requests: a flow, then another past the bound.
	if n := s.accepts.Load(); n != 2 {
		t.Fatalf("%d connections for 3 flows of 2 requests each at 3 a connection, want 2", n)
	}
}

// A read deadline that passes fails that Read only: the flow goes on.
func TestXHTTPReadDeadline(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up"}, nil))
	c := dialCtx(t, d)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	xhEcho(t, c, 3000, 1000)
}

// A server that takes the connection and never answers fails the dial
// within its deadline, in every mode.
func TestXHTTPSilentServer(t *testing.T) {
	addr := accept(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	for _, mode := range []string{"stream-one", "stream-up", "packet-up"} {
		t.Run(mode, func(t *testing.T) {
			d := newDialer(t, xhOutbound(addr, spec.Transport{Mode: mode}, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			c, err := d.Dial(ctx)
			if err == nil {
				c.Close()
				t.Fatal("a dial to a silent server succeeded")
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the dial failed after %v, past its 300ms deadline", took)
			}
			if n := d.xhttp.idleCount(); n != 0 {
				t.Fatalf("%d connections to the silent server kept idle", n)
			}
		})
	}
}

// A server that answers anything but 200 fails the dial with its status.
func TestXHTTPRefusedRequest(t *testing.T) {
	s := newXHServer(t, nil)
	s.padLo = 2000 // refuses every padding the client sends
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	if err == nil {
		c.Close()
		t.Fatal("a refused request made a flow")
	}
	if !strings.Contains(err.Error(), "400") {
		t.Fatalf("the error does not tell the status: %v", err)
	}
}

func TestXHTTPConfigRefuses(t *testing.T) {
	for _, c := range []struct {
		tr   spec.Transport
		tls  bool
		alpn []string
	}{
		{spec.Transport{Mode: "stream-all"}, false, nil},
		{spec.Transport{Mode: "stream-one"}, true, []string{"http/1.1"}},
		{spec.Transport{Mode: "stream-up"}, true, []string{"http/1.1"}},
	} {
		if _, err := newXHTTPConfig(c.tr, "h.test", c.tls, false, c.alpn); err == nil {
			t.Errorf("%+v (tls %v, alpn %v) accepted", c.tr, c.tls, c.alpn)
		}
	}
	for _, c := range []struct {
		tr     spec.Transport
		tls    bool
		real   bool
		alpn   []string
		mode   string
		h1     bool
		scheme string
	}{
		{spec.Transport{Mode: "auto"}, false, false, nil, "packet-up", true, "http"},
		{spec.Transport{Mode: "auto"}, true, false, []string{"h2"}, "packet-up", false, "https"},
		{spec.Transport{Mode: "auto"}, true, true, nil, "stream-one", false, "https"},
		{spec.Transport{Mode: "packet-up"}, true, true, nil, "packet-up", false, "https"},
		{spec.Transport{Mode: "packet-up"}, true, false, []string{"http/1.1"}, "packet-up", true, "https"},
		{spec.Transport{Mode: "stream-one"}, false, false, nil, "stream-one", false, "http"},
	} {
		x, err := newXHTTPConfig(c.tr, "h.test", c.tls, c.real, c.alpn)
		if err != nil {
			t.Fatal(err)
		}
		if x.mode != c.mode || x.h1 != c.h1 || x.scheme != c.scheme {
			t.Errorf("%+v: mode %s, h1 %v, scheme %s; want %s, %v, %s", c.tr, x.mode, x.h1, x.scheme, c.mode, c.h1, c.scheme)
		}
	}
}
