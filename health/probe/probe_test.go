package probe

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/netx"

	"go.uber.org/goleak"
)

// A node slow to connect still reports the round trip of the warm request:
// neither the proxy dial nor the first round is in the RTT.
func TestRTTExcludesDial(t *testing.T) {
	s := newH1Server(t, func(req int, _ string) reply {
		if req == 0 {
			return reply{wire: noContent, delay: 150 * time.Millisecond} // a slow first round
		}
		return reply{wire: noContent}
	})
	d := &testDialer{delay: 300 * time.Millisecond}
	p := New(d, Options{})
	start := time.Now()
	res, err := p.TCP(within(t, 10*time.Second), s.url("/generate_204"), "HEAD")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took < 450*time.Millisecond {
		t.Fatalf("the probe took %v: the dial delay or the slow first round was not applied", took)
	}
	if res.RTT <= 0 || res.RTT >= 100*time.Millisecond {
		t.Fatalf("RTT %v; want the loopback round trip (< 100ms), not the dial or the first round", res.RTT)
	}
	if res.Family != netx.V4 {
		t.Errorf("family %v; want V4 (the stream's remote address)", res.Family)
	}
}

// The warm-up HEAD and the configured method travel on one connection.
func TestWarmUpThenMethodOnOneConnection(t *testing.T) {
	for _, method := range []string{"HEAD", "GET", "get", ""} {
		t.Run(method, func(t *testing.T) {
			s := newH1Server(t, func(_ int, m string) reply {
				if m == "GET" {
					return reply{wire: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"}
				}
				return reply{wire: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"}
			})
			d := &testDialer{}
			if _, err := New(d, Options{}).TCP(within(t, 5*time.Second), s.url("/"), method); err != nil {
				t.Fatal(err)
			}
			want := strings.ToUpper(method)
			if want == "" {
				want = "HEAD"
			}
			if got := s.seen(); len(got) != 1 || !slices.Equal(got[0], []string{"HEAD", want}) {
				t.Fatalf("requests per connection %v; want one connection with HEAD, %s", got, want)
			}
			if n := d.streams.Load(); n != 1 {
				t.Fatalf("%d streams through the node; want 1", n)
			}
		})
	}
}

func TestStatuses(t *testing.T) {
	cases := []struct {
		name string
		wire string
		want error // nil: the probe succeeds
	}{
		{"200", "HTTP/1.1 200 OK\r\n\r\n", nil},
		{"204", noContent, nil},
		{"301", "HTTP/1.1 301 Moved\r\nLocation: /x\r\n\r\n", nil},
		{"404", "HTTP/1.1 404 Not Found\r\n\r\n", nil},
		{"499", "HTTP/1.1 499 Client Closed\r\n\r\n", nil},
		{"500", "HTTP/1.1 500 Internal Server Error\r\n\r\n", &StatusError{Code: 500}},
		{"503", "HTTP/1.1 503 Unavailable\r\n\r\n", &StatusError{Code: 503}},
		{"199", "HTTP/1.1 199 Odd\r\n\r\n" + noContent, nil},
		{"informational heads", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + noContent, nil},
		{"an informational head and 500", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\n\r\n", &StatusError{Code: 500}},
		{"101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", ErrSwitch},
		{"100 then 101", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n", ErrSwitch},
		{"malformed", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", ErrBadHead},
		{"not HTTP", "SSH-2.0-OpenSSH_9.6\r\n", ErrBadHead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH1Server(t, always(tc.wire))
			_, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "GET")
			checkErr(t, err, tc.want)
		})
	}
}

// A bad final status fails in either round.
func TestStatusOfEitherRound(t *testing.T) {
	for round := range 2 {
		s := newH1Server(t, func(req int, _ string) reply {
			if req == round {
				return reply{wire: "HTTP/1.1 502 Bad Gateway\r\n\r\n"}
			}
			return reply{wire: noContent}
		})
		_, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
		checkErr(t, err, &StatusError{Code: 502})
	}
}

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	var se *StatusError
	switch w := want.(type) {
	case nil:
		if err != nil {
			t.Fatalf("probe failed: %v", err)
		}
	case *StatusError:
		if !errors.As(err, &se) || se.Code != w.Code {
			t.Fatalf("error %v; want status %d", err, w.Code)
		}
	default:
		// A sentinel matches; another want names a part of the text.
		if err == nil || (!errors.Is(err, want) && !strings.Contains(err.Error(), want.Error())) {
			t.Fatalf("error %v; want %v", err, want)
		}
	}
}

// paddedHead is a 204 head of exactly size bytes, status line to empty line.
func paddedHead(size int) string {
	const pre, post = "HTTP/1.1 204 No Content\r\nX-Pad: ", "\r\n\r\n"
	return pre + strings.Repeat("p", size-len(pre)-len(post)) + post
}

// A round's heads may total 16 KiB, counted from the response's first byte
// to the end of the final head's empty line, informational heads included;
// one byte more fails.
func TestHeadCap(t *testing.T) {
	const early = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
	cases := []struct {
		name  string
		round int // the round that gets the large head
		wire  string
		want  error
	}{
		{"16 KiB", 0, paddedHead(MaxHead), nil},
		{"16 KiB + 1", 0, paddedHead(MaxHead + 1), ErrHeadTooLarge},
		{"16 KiB in the second round", 1, paddedHead(MaxHead), nil},
		{"16 KiB + 1 in the second round", 1, paddedHead(MaxHead + 1), ErrHeadTooLarge},
		{"16 KiB with an informational head", 0, early + paddedHead(MaxHead-len(early)), nil},
		{"16 KiB + 1 with an informational head", 0, early + paddedHead(MaxHead+1-len(early)), ErrHeadTooLarge},
		{"informational heads alone past 16 KiB", 0, strings.Repeat(early, MaxHead/len(early)+1) + noContent, ErrHeadTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH1Server(t, func(req int, _ string) reply {
				if req == tc.round {
					return reply{wire: tc.wire}
				}
				return reply{wire: noContent}
			})
			_, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
			checkErr(t, err, tc.want)
		})
	}
}

// A second round that fails in transport, before any byte of its answer,
// leaves the validated warm-up sample; a partial or bad answer fails.
func TestSecondRoundFailure(t *testing.T) {
	const slowFirst = 120 * time.Millisecond
	cases := []struct {
		name   string
		second reply
		first  reply
		want   error
		seen   int // requests the server reads
	}{
		{"closed after the first response", reply{}, reply{wire: noContent, close: true}, nil, 1},
		{"Connection: close", reply{wire: noContent}, reply{wire: "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"}, nil, 1},
		{"closed without an answer", reply{close: true}, reply{wire: noContent}, nil, 2},
		{"a partial head, then closed", reply{wire: "HTTP/1.1 204 No", close: true}, reply{wire: noContent}, errors.New("EOF"), 2},
		{"a bad head", reply{wire: "HTTP/1.1 2x4\r\n\r\n"}, reply{wire: noContent}, ErrBadHead, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH1Server(t, func(req int, _ string) reply {
				if req == 0 {
					r := tc.first
					r.delay = slowFirst
					return r
				}
				return tc.second
			})
			res, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "GET")
			if tc.want != nil {
				checkErr(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.RTT < slowFirst {
				t.Fatalf("RTT %v; want the warm-up sample (at least %v)", res.RTT, slowFirst)
			}
			if got := s.seen(); len(got) != 1 || len(got[0]) != tc.seen {
				t.Fatalf("server saw %v; want %d requests on one connection", got, tc.seen)
			}
		})
	}
}

// A server that never answers is bounded by the request budget and by the
// probe's context.
func TestStalledServerBounded(t *testing.T) {
	s := newH1Server(t, func(int, string) reply { return reply{delay: time.Second} })
	start := time.Now()
	_, err := New(&testDialer{}, Options{}).TCP(within(t, 200*time.Millisecond), s.url("/"), "HEAD")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("context-bounded: %v after %v", err, time.Since(start))
	}
	start = time.Now()
	p := New(&testDialer{}, Options{Timeouts: Timeouts{Request: 200 * time.Millisecond}})
	_, err = p.TCP(context.Background(), s.url("/"), "HEAD")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("budget-bounded: %v after %v", err, time.Since(start))
	}
}

// A dial slower than its budget fails at the budget.
func TestDialBudget(t *testing.T) {
	s := newH1Server(t, always(noContent))
	p := New(&testDialer{delay: 2 * time.Second}, Options{Timeouts: Timeouts{Dial: 100 * time.Millisecond}})
	start := time.Now()
	_, err := p.TCP(context.Background(), s.url("/"), "HEAD")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}

// A failure after the stream opened carries the stream's family.
func TestFailureCarriesFamily(t *testing.T) {
	s := newH1Server(t, always("HTTP/1.1 500 Oops\r\n\r\n"))
	_, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
	var fe *health.FamilyError
	if !errors.As(err, &fe) || fe.Family != netx.V4 {
		t.Fatalf("%v; want a FamilyError of V4", err)
	}
	// Before any stream, nothing tells the family.
	_, err = New(&refusingDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
	if err == nil || errors.As(err, &fe) {
		t.Fatalf("%v; want a failure without a family", err)
	}
	// ... unless the node says it.
	_, err = New(&refusingDialer{family: netx.V6}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
	if !errors.As(err, &fe) || fe.Family != netx.V6 {
		t.Fatalf("%v; want a FamilyError of V6", err)
	}
}

// refusingDialer refuses every flow; with a family it reports one.
type refusingDialer struct{ family netx.Family }

func (d *refusingDialer) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("refused")
}

func (d *refusingDialer) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, errors.New("refused")
}

func (d *refusingDialer) ServerFamily() (netx.Family, bool) { return d.family, d.family == netx.V6 }

// The stream's family comes from its remote address, IPv6 included; a
// node's own report comes first.
func TestFamilyOfStream(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	s := &h1Server{t: t, ln: ln, script: always(noContent)}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	res, err := New(&testDialer{}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
	if err != nil || res.Family != netx.V6 {
		t.Fatalf("%+v, %v; want V6", res, err)
	}
	res, err = New(&reportingDialer{testDialer{}, netx.V4}, Options{}).TCP(within(t, 5*time.Second), s.url("/"), "HEAD")
	if err != nil || res.Family != netx.V4 {
		t.Fatalf("%+v, %v; want the node's V4", res, err)
	}
}

type reportingDialer struct {
	testDialer
	family netx.Family
}

func (d *reportingDialer) ServerFamily() (netx.Family, bool) { return d.family, true }

func TestRawConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	server, _ := netx.ParseAddr(ln.Addr().String())
	d := &testDialer{}
	res, err := New(d, Options{Server: server}).TCP(within(t, 5*time.Second), "", "")
	if err != nil || res.RTT <= 0 || res.Family != netx.V4 {
		t.Fatalf("%+v, %v", res, err)
	}
	if d.streams.Load() != 0 {
		t.Fatal("a raw connect went through the node")
	}

	// The socket policy's dialer is used when given.
	var dialed []netx.Addr
	dial := func(ctx context.Context, a netx.Addr) (net.Conn, error) {
		dialed = append(dialed, a)
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", a.String())
	}
	if _, err := New(d, Options{Server: server, DialTCP: dial}).TCP(within(t, 5*time.Second), "", ""); err != nil {
		t.Fatal(err)
	}
	if len(dialed) != 1 || dialed[0] != server {
		t.Fatalf("DialTCP saw %v; want %v", dialed, server)
	}

	// A refused connect fails with the server's family.
	ln.Close()
	_, err = New(d, Options{Server: server}).TCP(within(t, 5*time.Second), "", "")
	var fe *health.FamilyError
	if !errors.As(err, &fe) || fe.Family != netx.V4 {
		t.Fatalf("%v; want a FamilyError of V4", err)
	}
}

// A node without a TCP server to connect to is probed with HTTP through
// itself, on DefaultURL.
func TestRawConnectWithoutServer(t *testing.T) {
	d := &testDialer{dsts: make(chan netx.Addr, 1), delay: time.Hour}
	_, err := New(d, Options{}).TCP(within(t, 50*time.Millisecond), "", "")
	if err == nil {
		t.Fatal("the probe succeeded without a network")
	}
	if got := <-d.dsts; got != netx.DomainAddr("www.gstatic.com", 443) {
		t.Fatalf("dialed %v through the node; want www.gstatic.com:443", got)
	}
}

func TestBadInput(t *testing.T) {
	p := New(&testDialer{}, Options{})
	if _, err := p.TCP(context.Background(), "gopher://x/", "HEAD"); !errors.Is(err, ErrBadURL) {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := p.TCP(context.Background(), DefaultURL, "POST"); !errors.Is(err, ErrMethod) {
		t.Errorf("bad method: %v", err)
	}
	if _, err := p.UDP(context.Background(), netx.Addr{}); err == nil {
		t.Error("UDP without a server succeeded")
	}
}

// A probe cancelled in the middle of the target's TLS handshake returns at
// once and leaves no goroutine behind.
func TestCancelLeavesNothing(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // never answers the ClientHello
		}
		close(accepted)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = New(&testDialer{}, Options{}).TCP(ctx, "https://"+ln.Addr().String()+"/", "HEAD")
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	ln.Close()
	for c := range accepted {
		c.Close()
	}
	goleak.VerifyNone(t, before)
}
