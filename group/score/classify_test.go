package score_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/group/score"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/http"
	"switchyard/outbound/socks"
	"switchyard/outbound/vmess"
	"switchyard/outbound/wireguard"
	"switchyard/plane"
	"switchyard/protocol/shadowsocks"
	"switchyard/protocol/socks5"
	"switchyard/protocol/vless"
	protovmess "switchyard/protocol/vmess"
	syspec "switchyard/spec"
	"switchyard/track"
)

// fakeServer accepts connections on loopback and runs serve on each; it is
// closed, and its goroutines waited for, at the test's end.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func deps() outbound.Deps {
	return outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, time.Second), Servers: netx.SystemResolver{}}
}

var netipLoopback = netip.MustParseAddrPort("127.0.0.1:9")

var classifyFlow = netx.Flow{Network: netx.TCP, Dst: netx.Addr{Name: "target.example", Port: 443}}

// socksReply is the error a real SOCKS5 client gets from a server that
// accepts no authentication and answers the CONNECT with status.
func socksReply(t *testing.T, status byte) error {
	addr := fakeServer(t, func(c net.Conn) {
		b := make([]byte, 3)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		c.Write([]byte{5, 0})
		r := bufio.NewReader(c)
		if _, err := socks5.ReadRequest(r); err != nil {
			return
		}
		c.Write([]byte{5, status, 0, 1, 0, 0, 0, 0, 0, 0})
		io.Copy(io.Discard, c)
	})
	o, err := socks.New(syspec.Outbound{Tag: "s", Type: "socks", Server: addr}, deps())
	if err != nil {
		t.Fatal(err)
	}
	return dialErr(t, o)
}

// socksAuthRejected is the error of a server refusing the credentials.
func socksAuthRejected(t *testing.T) error {
	addr := fakeServer(t, func(c net.Conn) {
		b := make([]byte, 3)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		c.Write([]byte{5, 2})
		up := make([]byte, 64)
		c.Read(up)
		c.Write([]byte{1, 1})
		io.Copy(io.Discard, c)
	})
	o, err := socks.New(syspec.Outbound{Tag: "s", Type: "socks", Server: addr, Username: "u", Password: "p"}, deps())
	if err != nil {
		t.Fatal(err)
	}
	return dialErr(t, o)
}

// httpStatus is the error of an HTTP proxy answering CONNECT with line.
func httpStatus(t *testing.T, line string) error {
	addr := fakeServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
		}
		c.Write([]byte(line + "\r\n\r\n"))
		io.Copy(io.Discard, c)
	})
	o, err := http.New(syspec.Outbound{Tag: "h", Type: "http", Server: addr}, deps())
	if err != nil {
		t.Fatal(err)
	}
	return dialErr(t, o)
}

// vmessClosed is the error a VMess flow reads when its server sends head
// (nothing, or the start of a response header) and closes.
func vmessClosed(t *testing.T, head []byte) error {
	addr := fakeServer(t, func(c net.Conn) {
		b := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		c.Read(b)
		c.Write(head)
		// Half-close and drain: closing with unread request bytes would
		// answer with a reset instead of the end of stream under test.
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, c)
	})
	o, err := vmess.New(syspec.Outbound{Tag: "v", Type: "vmess", Server: addr, UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Security: "aes-128-gcm"}, deps())
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.DialStream(context.Background(), classifyFlow)
	if err != nil {
		return err
	}
	defer c.Close()
	c.Write([]byte("hello"))
	_, err = c.Read(make([]byte, 64))
	if err == nil {
		t.Fatal("a closed VMess server read without an error")
	}
	return err
}

func dialErr(t *testing.T, o outbound.Outbound) error {
	t.Helper()
	c, err := o.DialStream(context.Background(), classifyFlow)
	if err == nil {
		c.Close()
		t.Fatal("the dial succeeded")
	}
	return err
}

// admissionTimeout is a real dial's failure waiting for dial admission.
func admissionTimeout(t *testing.T) error {
	adm := netx.NewAdmission(netx.NewGate(1), 1)
	if err := adm.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer adm.Release()
	e, ctx, cancel := netx.Begin(context.Background(), adm, 20*time.Millisecond)
	defer cancel()
	defer e.End()
	_, err := netx.NewDialer(netx.SocketPolicy{}, time.Second).Connect(ctx, netipLoopback)
	if err == nil {
		t.Fatal("connect without admission")
	}
	return err
}

// establishmentTimeout is a real dial's deadline expiring after
// admission, in its connect: an ordinary timeout.
func establishmentTimeout(t *testing.T) error {
	e, ctx, cancel := netx.Begin(context.Background(), nil, time.Nanosecond)
	defer cancel()
	defer e.End()
	time.Sleep(time.Millisecond)
	_, err := netx.NewDialer(netx.SocketPolicy{}, time.Second).Connect(ctx, netipLoopback)
	if err == nil {
		t.Fatal("connect after the deadline")
	}
	return err
}

// errTooLarge is the runtime's size refusal as a protocol client returns
// it (the Shadowsocks codec's, exported).
var errTooLarge = shadowsocks.ErrFrameTooLarge

func TestClassify(t *testing.T) {
	carrier := netx.WithEpisode(errors.New("grpc: the connection to the server broke: EOF"), netx.FaultCarrier, netx.NewEpisode())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name       string
		err        error
		afterSetup bool
		kind       score.FailureKind // 0: neutral
	}{
		{"socks connection refused", socksReply(t, socks5.ReplyConnectionRefused), false, score.TargetRefused},
		{"socks not allowed by ruleset", socksReply(t, socks5.ReplyNotAllowed), false, score.TargetRefused},
		{"socks host unreachable", socksReply(t, socks5.ReplyHostUnreachable), false, score.TargetPath},
		{"socks network unreachable", socksReply(t, socks5.ReplyNetworkUnreachable), false, score.TargetPath},
		{"socks TTL expired", socksReply(t, socks5.ReplyTTLExpired), false, score.TargetPath},
		{"socks general failure", socksReply(t, socks5.ReplyGeneralFailure), false, score.ProxyProtocol},
		{"socks command not supported", socksReply(t, socks5.ReplyCommandNotSupported), false, score.ProxyProtocol},
		{"socks credentials refused", socksAuthRejected(t), false, score.ProxyAuth},
		{"socks association ended by the server", socks.ErrControlClosed, true, score.SharedSource},
		{"http 502", httpStatus(t, "HTTP/1.1 502 Bad Gateway"), false, score.TargetPath},
		{"http 503", httpStatus(t, "HTTP/1.1 503 Service Unavailable"), false, score.TargetPath},
		{"http 504", httpStatus(t, "HTTP/1.1 504 Gateway Timeout"), false, score.TargetPath},
		{"http 403", httpStatus(t, "HTTP/1.1 403 Forbidden"), false, score.TargetRefused},
		{"http 407", httpStatus(t, "HTTP/1.1 407 Proxy Authentication Required"), false, score.ProxyAuth},
		{"http 400", httpStatus(t, "HTTP/1.1 400 Bad Request"), false, score.ProxyProtocol},
		{"http malformed status", httpStatus(t, "SSH-2.0-OpenSSH"), false, score.Framing},
		{"vmess eof before any header byte", vmessClosed(t, nil), true, score.VMessEOFBeforeHeader},
		{"vmess partial header", vmessClosed(t, []byte{1, 2, 3}), true, score.VMessBadHeader},
		{"vmess header mismatch", fmt.Errorf("vmess: %w", protovmess.ErrResponseMismatch), true, score.VMessBadHeader},
		{"vmess chunk auth", protovmess.ErrChunkAuth, true, score.Framing},
		{"vless version", fmt.Errorf("%w 9 (expected 0)", vless.ErrVersion), true, score.Framing},
		{"shared carrier", carrier, true, score.SharedCarrier},
		{"wireguard tunnel down", wireguard.ErrTunnelDown, false, score.SharedDial},
		{"unknown before setup", io.ErrUnexpectedEOF, false, score.UnknownPreSetup},
		{"timeout before setup", establishmentTimeout(t), false, score.UnknownPreSetup},
		{"io after setup", errors.New("read tcp: connection reset by peer"), true, score.FlowIO},
		{"timeout after setup", context.DeadlineExceeded, true, score.FlowIO},
		{"udp sub-link without a reply", fanout.ErrNoReply, true, score.FlowIO},
		{"udp open without a reply", fanout.ErrNoReply, false, score.UnknownPreSetup},

		{"admission wait", admissionTimeout(t), false, 0},
		{"drained", plane.ErrDrained, true, 0},
		{"retired", fmt.Errorf("dial: %w", plane.ErrRetired), false, 0},
		{"killed", track.ErrKilled, true, 0},
		{"blocked", outbound.ErrBlocked, false, 0},
		{"no udp", &outbound.NoUDPError{What: "http"}, false, 0},
		{"cancelled", context.Cause(cancelled), false, 0},
		{"closed here", fmt.Errorf("read: %w", net.ErrClosed), true, 0},
		{"carrier retired here", netx.WithFault(errors.New("hysteria2: the connection behind this association is gone"), netx.FaultRetired), true, 0},
		{"datagram too large", fmt.Errorf("xudp: %w", errTooLarge), true, 0},
		{"nil", nil, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, neutral := score.Classify(c.err, c.afterSetup)
			if c.kind == 0 {
				if !neutral || f != (score.Failure{}) {
					t.Fatalf("Classify(%v) = %v, %v; want neutral", c.err, f, neutral)
				}
				return
			}
			if neutral || f.Kind != c.kind {
				t.Fatalf("Classify(%v) = %v (neutral %v); want %v", c.err, f.Kind, neutral, c.kind)
			}
		})
	}
}

// A fanned-out failure keeps its episode: every flow handed the same error
// reports the same EpisodeID, another failure another one, and none
// collides with the Scorer's own episodes.
func TestClassifyEpisodes(t *testing.T) {
	one := netx.WithEpisode(errors.New("hysteria2: the connection behind this association is gone"), netx.FaultCarrier, netx.NewEpisode())
	other := netx.WithEpisode(errors.New("hysteria2: the connection behind this association is gone"), netx.FaultCarrier, netx.NewEpisode())
	a, _ := score.Classify(fmt.Errorf("flow a: %w", one), true)
	b, _ := score.Classify(one, false)
	c, _ := score.Classify(other, true)
	if a.Episode == 0 || a.Episode != b.Episode {
		t.Fatalf("one carrier failure gave episodes %d and %d", a.Episode, b.Episode)
	}
	if c.Episode == a.Episode {
		t.Fatalf("two carrier failures share episode %d", c.Episode)
	}
	s := score.New(nil, nil)
	if ep := s.NewEpisode(); ep == a.Episode || ep == c.Episode {
		t.Fatalf("a scorer episode %d collides with a carrier's", ep)
	}
	if f, _ := score.Classify(netx.WithFault(errors.New("x"), netx.FaultFraming), true); f.Episode != 0 {
		t.Fatalf("a failure of its own has episode %d", f.Episode)
	}
}
