package supervisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/relay"
	"switchyard/track"
)

// fakeAttempt records what the data path reports to one Score attempt.
type fakeAttempt struct {
	mu     sync.Mutex
	events []string
	tx, rx int64
	err    error // the Fail's
	refuse error // Begin's answer
}

func (a *fakeAttempt) log(e string) {
	a.mu.Lock()
	a.events = append(a.events, e)
	a.mu.Unlock()
}

func (a *fakeAttempt) Begin(time.Time) (plane.Report, error) {
	if a.refuse != nil {
		a.log("refused")
		return nil, a.refuse
	}
	a.log("begin")
	return a, nil
}
func (a *fakeAttempt) Release(time.Time)  { a.log("release") }
func (a *fakeAttempt) Setup(time.Time)    { a.log("setup") }
func (a *fakeAttempt) Response(time.Time) { a.log("response") }
func (a *fakeAttempt) Progress(_ time.Time, tx, rx int64) {
	a.mu.Lock()
	a.tx += tx
	a.rx += rx
	a.mu.Unlock()
}
func (a *fakeAttempt) Settle(time.Time) { a.log("settle") }
func (a *fakeAttempt) Fail(_ time.Time, err error) {
	a.mu.Lock()
	a.err = err
	a.mu.Unlock()
	a.log("fail")
}
func (a *fakeAttempt) Cancel(time.Time) { a.log("cancel") }

func (a *fakeAttempt) seen() ([]string, int64, int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events), a.tx, a.rx, a.err
}

// scoreChooser picks leaves in order and attaches the next attempts to
// each pick; a setup failure of a pick retries once on the next leaf.
type scoreChooser struct {
	mu       sync.Mutex
	leaves   []*plane.Target
	attempts [][]*fakeAttempt // per pick
	picks    int
	retries  int
}

func (c *scoreChooser) next(q *plane.Query) *plane.Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.picks >= len(c.leaves) {
		return nil
	}
	l := c.leaves[c.picks]
	for _, a := range c.attempts[c.picks] {
		q.Attempts.Add(a, time.Now())
	}
	c.picks++
	return l
}

func (c *scoreChooser) Choose(q *plane.Query) *plane.Target { return c.next(q) }

func (c *scoreChooser) Retry(q *plane.Query, failed *plane.Target) []*plane.Target {
	c.mu.Lock()
	c.retries++
	c.mu.Unlock()
	q.Exclude, q.Retry = failed.Node(), true
	if l := c.next(q); l != nil {
		return []*plane.Target{l}
	}
	return nil
}

// dialFunc is an in-process outbound.
type dialFunc func(ctx context.Context, f netx.Flow) (net.Conn, error)

func (d dialFunc) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) { return d(ctx, f) }
func (d dialFunc) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, errors.New("no udp")
}

// serving is an outbound whose every stream is served by serve on the
// other end of a pipe.
func serving(serve func(c net.Conn)) dialFunc {
	return func(context.Context, netx.Flow) (net.Conn, error) {
		a, b := net.Pipe()
		go serve(b)
		return a, nil
	}
}

func fakeLeaf(tag string, out dialFunc) *plane.Target {
	t := plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, out)
	var id [16]byte
	copy(id[:], tag)
	t.SetNode(id)
	return t
}

func scoreConnector(ch *scoreChooser) *connector {
	var cell plane.Cell
	cell.Store(&plane.Plane{Final: plane.NewChooserTarget(plane.OutboundID{Tag: "smart", Version: 1}, ch)})
	return &connector{cell: &cell, tracker: track.New(), log: slog.New(slog.DiscardHandler),
		health: healthReports{engine: func() *health.Engine { return nil }}}
}

var scoreDst = netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.7:443"))

// relayThrough connects a flow and relays it against a client pipe driven
// by client; it returns once the relay did.
func relayThrough(t *testing.T, c *connector, client func(net.Conn)) error {
	t.Helper()
	up, err := c.ConnectStream(context.Background(), netx.Flow{Dst: scoreDst, Inbound: "in"})
	if err != nil {
		return err
	}
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		client(b)
	}()
	relay.Pipe(context.Background(), a, up, time.Second)
	<-done
	return nil
}

func wantEvents(t *testing.T, a *fakeAttempt, want ...string) {
	t.Helper()
	got, _, _, _ := a.seen()
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A relayed flow reports set up at its dial, its first response byte, the
// bytes moved both ways and one settlement at the client's clean end, to
// every attempt the selection attached (nested Score groups each).
func TestAScoreFlowReportsSetupResponseProgressAndSettles(t *testing.T) {
	outer, inner := &fakeAttempt{}, &fakeAttempt{}
	echo := serving(func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Write(buf[:n])
		io.Copy(io.Discard, c)
	})
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", echo)}, attempts: [][]*fakeAttempt{{outer, inner}}}
	err := relayThrough(t, scoreConnector(ch), func(c net.Conn) {
		c.Write([]byte("hello"))
		buf := make([]byte, 5)
		io.ReadFull(c, buf)
		c.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*fakeAttempt{outer, inner} {
		wantEvents(t, a, "begin", "setup", "response", "settle")
		if _, tx, rx, _ := a.seen(); tx != 5 || rx != 5 {
			t.Fatalf("progress tx %d rx %d, want 5 and 5", tx, rx)
		}
	}
}

// An upstream error fails the flow with that error.
func TestAScoreFlowFailsOnAnUpstreamError(t *testing.T) {
	boom := errors.New("upstream broke")
	a := &fakeAttempt{}
	out := dialFunc(func(context.Context, netx.Flow) (net.Conn, error) {
		x, y := net.Pipe()
		go func() {
			buf := make([]byte, 64)
			y.Read(buf)
			y.Write([]byte("partial"))
			y.Close()
		}()
		return &breakingConn{Conn: x, after: 1, err: boom}, nil
	})
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", out)}, attempts: [][]*fakeAttempt{{a}}}
	relayThrough(t, scoreConnector(ch), func(c net.Conn) {
		c.Write([]byte("hello"))
		io.Copy(io.Discard, c)
		c.Close()
	})
	wantEvents(t, a, "begin", "setup", "response", "fail")
	if _, _, _, err := a.seen(); !errors.Is(err, boom) {
		t.Fatalf("failed with %v, want the upstream's error", err)
	}
}

// breakingConn fails its reads with err after the first `after` reads.
type breakingConn struct {
	net.Conn
	after, reads int
	err          error
}

func (b *breakingConn) Read(p []byte) (int, error) {
	if b.reads >= b.after {
		return 0, b.err
	}
	b.reads++
	return b.Conn.Read(p)
}

// An upstream that takes the client's data and ends its stream without a
// byte of response is a silent target: the flow fails with ErrNoResponse.
func TestASilentUpstreamEndOfStreamFails(t *testing.T) {
	a := &fakeAttempt{}
	silent := serving(func(c net.Conn) {
		buf := make([]byte, 64)
		c.Read(buf)
		c.Close()
	})
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", silent)}, attempts: [][]*fakeAttempt{{a}}}
	relayThrough(t, scoreConnector(ch), func(c net.Conn) {
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		io.Copy(io.Discard, c)
		c.Close()
	})
	wantEvents(t, a, "begin", "setup", "fail")
	if _, _, _, err := a.seen(); !errors.Is(err, plane.ErrNoResponse) {
		t.Fatalf("failed with %v, want ErrNoResponse", err)
	}
}

// A server that ends the stream on a request header sent at dial time
// (VLESS's, which Xray routes to a blackhole) closes while the relay's
// write of the client's first bytes is still under way: the end of stream
// came after the client's data all the same, so the flow fails as a
// silent target rather than settling.
func TestASilentEndDuringTheClientsFirstWriteFails(t *testing.T) {
	a := &fakeAttempt{}
	out := dialFunc(func(context.Context, netx.Flow) (net.Conn, error) {
		x, y := net.Pipe()
		go io.Copy(io.Discard, y)
		return &headerOnlyConn{Conn: x, entered: make(chan struct{}), closed: make(chan struct{})}, nil
	})
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", out)}, attempts: [][]*fakeAttempt{{a}}}
	relayThrough(t, scoreConnector(ch), func(c net.Conn) {
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		io.Copy(io.Discard, c)
		c.Close()
	})
	wantEvents(t, a, "begin", "setup", "fail")
	if _, tx, _, err := a.seen(); !errors.Is(err, plane.ErrNoResponse) || tx != 0 {
		t.Fatalf("failed with %v after %d bytes up, want ErrNoResponse with none accepted", err, tx)
	}
}

// headerOnlyConn is an upstream that took its request at dial time: its
// first Write never completes (the server reads no more) and its Read ends
// the stream once that write began; Close ends the write.
type headerOnlyConn struct {
	net.Conn
	entered, closed chan struct{}
	enter, close    sync.Once
}

func (c *headerOnlyConn) Write([]byte) (int, error) {
	c.enter.Do(func() { close(c.entered) })
	<-c.closed
	return 0, net.ErrClosed
}

func (c *headerOnlyConn) Read([]byte) (int, error) {
	select {
	case <-c.entered:
		return 0, io.EOF
	case <-c.closed:
		return 0, net.ErrClosed
	}
}

func (c *headerOnlyConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// The relay's client-side errors (a reset, a broken pipe) and an owner's
// stop cancel; an idle end without a response cancels, with one settles.
func TestClientSideAndOwnerEndsCancel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       relay.End
		responded bool
		want      string
	}{
		{"client reset", relay.Classify(relay.EndClient, syscall.ECONNRESET), true, "cancel"},
		{"client broken pipe", relay.Classify(relay.EndClient, syscall.EPIPE), true, "cancel"},
		{"client gone before any response", relay.Classify(relay.EndClient, nil), false, "cancel"},
		{"stop", relay.Classify(relay.EndStop, context.Canceled), true, "cancel"},
		{"drained", relay.Classify(relay.EndUpstream, plane.ErrDrained), true, "cancel"},
		{"idle unanswered", relay.Classify(relay.EndIdle, relay.ErrIdle), false, "cancel"},
		{"idle answered", relay.Classify(relay.EndIdle, relay.ErrIdle), true, "settle"},
		{"upstream reset", relay.Classify(relay.EndUpstream, syscall.ECONNRESET), true, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &fakeAttempt{}
			var q plane.Query
			q.Attempts.Add(a, time.Now())
			sf, err := beginScore(&q, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			sf.up(10)
			if tc.responded {
				sf.down(10)
			}
			sf.relayEnded(time.Now(), tc.end)
			sf.relayEnded(time.Now(), relay.Classify(relay.EndUpstream, errors.New("late")))
			got, _, _, _ := a.seen()
			if got[len(got)-1] != tc.want || strings.Count(strings.Join(got, " "), tc.want) != 1 {
				t.Fatalf("events %v, want one %s at the end", got, tc.want)
			}
		})
	}
}

// A stale plan (Begin refuses) refuses the flow with the typed error: the
// outbound is never dialed, a begun sibling is cancelled and an unbegun
// one released, and no retry follows.
func TestAStalePlanRefusesTheFlow(t *testing.T) {
	stale := errors.New("score: serving-pool plan cancelled: departed")
	first, refusing, last := &fakeAttempt{}, &fakeAttempt{refuse: stale}, &fakeAttempt{}
	dialed := false
	out := dialFunc(func(context.Context, netx.Flow) (net.Conn, error) {
		dialed = true
		return nil, errors.New("dialed")
	})
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", out), fakeLeaf("b", out)},
		attempts: [][]*fakeAttempt{{first, refusing, last}, {}}}
	_, err := scoreConnector(ch).ConnectStream(context.Background(), netx.Flow{Dst: scoreDst})
	if !errors.Is(err, stale) {
		t.Fatalf("ConnectStream: %v, want the plan's refusal", err)
	}
	if dialed || ch.retries != 0 {
		t.Fatalf("dialed %v, retries %d: a refused plan was dialed", dialed, ch.retries)
	}
	wantEvents(t, first, "begin", "cancel")
	wantEvents(t, refusing, "refused")
	wantEvents(t, last, "release")
}

// A setup failure fails the attempt before setup and gets one sequential
// retry on a different leaf, whose own attempt is begun at its dial; a
// second failure gets no further retry.
func TestASetupFailureRetriesOnceOnAnotherLeaf(t *testing.T) {
	refused := errors.New("connection refused by the proxy")
	bad := dialFunc(func(context.Context, netx.Flow) (net.Conn, error) { return nil, refused })
	good := serving(func(c net.Conn) { c.Close() })
	first, second := &fakeAttempt{}, &fakeAttempt{}
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", bad), fakeLeaf("b", good)}, attempts: [][]*fakeAttempt{{first}, {second}}}
	up, err := scoreConnector(ch).ConnectStream(context.Background(), netx.Flow{Dst: scoreDst})
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
	wantEvents(t, first, "begin", "fail")
	wantEvents(t, second, "begin", "setup")
	if _, _, _, err := first.seen(); !errors.Is(err, refused) {
		t.Fatalf("first failed with %v", err)
	}

	// Both fail: one retry, then the flow fails.
	x, y := &fakeAttempt{}, &fakeAttempt{}
	ch = &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", bad), fakeLeaf("b", bad), fakeLeaf("c", good)}, attempts: [][]*fakeAttempt{{x}, {y}, {}}}
	if _, err := scoreConnector(ch).ConnectStream(context.Background(), netx.Flow{Dst: scoreDst}); !errors.Is(err, refused) {
		t.Fatalf("ConnectStream: %v, want the retry's failure", err)
	}
	if ch.retries != 1 || ch.picks != 2 {
		t.Fatalf("retries %d, picks %d: want one retry", ch.retries, ch.picks)
	}
	wantEvents(t, x, "begin", "fail")
	wantEvents(t, y, "begin", "fail")
}

// A dial the client abandons cancels its attempt and is not retried.
func TestAnAbandonedDialCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	hang := dialFunc(func(ctx context.Context, _ netx.Flow) (net.Conn, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := &fakeAttempt{}
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", hang), fakeLeaf("b", hang)}, attempts: [][]*fakeAttempt{{a}, {}}}
	if _, err := scoreConnector(ch).ConnectStream(ctx, netx.Flow{Dst: scoreDst}); err == nil {
		t.Fatal("an abandoned dial succeeded")
	}
	wantEvents(t, a, "begin", "cancel")
	if ch.retries != 0 {
		t.Fatal("an abandoned dial was retried")
	}
}

// A flow closed without a relay telling how it ended (its setup failed
// after the dial: the client's first bytes could not be written) is
// cancelled once its conn is dropped, so the attempt never stays open.
func TestAFlowClosedWithoutARelayIsCancelled(t *testing.T) {
	a := &fakeAttempt{}
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", serving(func(c net.Conn) { c.Close() }))}, attempts: [][]*fakeAttempt{{a}}}
	up, err := scoreConnector(ch).ConnectStream(context.Background(), netx.Flow{Dst: scoreDst})
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
	up = nil
	eventually(t, "the dropped flow's attempt to be cancelled", func() bool {
		runtime.GC()
		got, _, _, _ := a.seen()
		return slices.Contains(got, "cancel")
	})
	wantEvents(t, a, "begin", "setup", "cancel")
}

// A dial whose establishment runs out waiting for dial admission is this
// process's capacity refusal: the attempt is cancelled, not failed, and
// no retry follows.
func TestACapacityRefusalCancelsAndIsNotRetried(t *testing.T) {
	adm := netx.NewAdmission(netx.NewGate(1), 1)
	if err := adm.Acquire(context.Background()); err != nil { // the only permit, held
		t.Fatal(err)
	}
	defer adm.Release()
	waiting := dialFunc(func(ctx context.Context, _ netx.Flow) (net.Conn, error) {
		if err := netx.Admit(ctx); err != nil {
			return nil, err
		}
		return nil, errors.New("admitted")
	})
	a := &fakeAttempt{}
	ch := &scoreChooser{leaves: []*plane.Target{fakeLeaf("a", waiting), fakeLeaf("b", waiting)}, attempts: [][]*fakeAttempt{{a}, {}}}
	c := scoreConnector(ch)
	p := c.cell.Load()
	p.Admission, p.Establish = adm, 50*time.Millisecond
	if _, err := c.ConnectStream(context.Background(), netx.Flow{Dst: scoreDst}); err == nil {
		t.Fatal("a dial with no admission permit succeeded")
	}
	wantEvents(t, a, "begin", "cancel")
	if ch.retries != 0 {
		t.Fatal("a capacity refusal was retried")
	}
}

// refusingAttempt refuses its plan as stale after running reload.
type refusingAttempt struct {
	fakeAttempt
	reload func()
}

func (a *refusingAttempt) Begin(time.Time) (plane.Report, error) {
	a.reload()
	a.log("refused")
	return nil, &score.CancelError{Reason: score.Uninitialized}
}

// A plan a reload made stale (its serving pools reset) is routed again on
// the plane the reload published: the flow does not fail for the reload.
// Without a new plane the refusal stands.
func TestAPlanStaleByAReloadIsRoutedAgain(t *testing.T) {
	good := serving(func(c net.Conn) { c.Close() })
	fresh := &fakeAttempt{}
	next := &scoreChooser{leaves: []*plane.Target{fakeLeaf("b", good)}, attempts: [][]*fakeAttempt{{fresh}}}
	c := scoreConnector(&scoreChooser{})
	stale := &refusingAttempt{reload: func() {
		c.cell.Store(&plane.Plane{Final: plane.NewChooserTarget(plane.OutboundID{Tag: "smart", Version: 2}, next)})
	}}
	first := &chooserFunc{leaf: fakeLeaf("a", good), attempt: stale}
	c.cell.Store(&plane.Plane{Final: plane.NewChooserTarget(plane.OutboundID{Tag: "smart", Version: 1}, first)})
	up, err := c.ConnectStream(context.Background(), netx.Flow{Dst: scoreDst})
	if err != nil {
		t.Fatalf("a flow failed for a reload: %v", err)
	}
	up.Close()
	wantEvents(t, &stale.fakeAttempt, "refused")
	wantEvents(t, fresh, "begin", "setup")

	// The same refusal with no reload: the flow is refused.
	stale = &refusingAttempt{reload: func() {}}
	c.cell.Store(&plane.Plane{Final: plane.NewChooserTarget(plane.OutboundID{Tag: "smart", Version: 3}, &chooserFunc{leaf: fakeLeaf("a", good), attempt: stale})})
	if _, err := c.ConnectStream(context.Background(), netx.Flow{Dst: scoreDst}); !errors.Is(err, score.ErrStalePlan) {
		t.Fatalf("ConnectStream: %v, want the stale plan's refusal", err)
	}
}

// chooserFunc picks leaf with attempt on every query.
type chooserFunc struct {
	leaf    *plane.Target
	attempt plane.Attempt
}

func (c *chooserFunc) Choose(q *plane.Query) *plane.Target {
	q.Attempts.Add(c.attempt, time.Now())
	return c.leaf
}
