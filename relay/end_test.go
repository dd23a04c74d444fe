package relay_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/relay"
)

// endHeard is an upstream wrapper that only observes (so the relay still
// splices beneath it) and records every End it is told.
type endHeard struct {
	net.Conn
	mu   sync.Mutex
	ends []relay.End
}

var _ netx.Observed = (*endHeard)(nil)

func (e *endHeard) CloseWrite() error  { return e.Conn.(interface{ CloseWrite() error }).CloseWrite() }
func (e *endHeard) NetConn() net.Conn  { return e.Conn }
func (e *endHeard) ObserveRead(int64)  {}
func (e *endHeard) ObserveWrite(int64) {}
func (e *endHeard) FlowEnded(end relay.End) {
	e.mu.Lock()
	e.ends = append(e.ends, end)
	e.mu.Unlock()
}

func (e *endHeard) heard() []relay.End {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]relay.End(nil), e.ends...)
}

// reset ends c with a TCP reset.
func reset(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// stream writes to c until it fails.
func stream(c net.Conn) {
	b := make([]byte, 16<<10)
	for {
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// drain reads c until it fails.
func drain(c net.Conn) { io.Copy(io.Discard, c) }

// Every way a flow can end, over each path: the relay says who ended it
// first, with which error, and whether the upstream failed; the upstream's
// observer hears the same End exactly once.
func TestTheRelaySaysHowTheFlowEnded(t *testing.T) {
	type scenario struct {
		name    string
		idle    time.Duration
		act     func(t *testing.T, client, server net.Conn, stop context.CancelFunc)
		by      relay.Cause
		errIs   error // nil: no error
		failure bool
	}
	for _, sc := range []scenario{
		{name: "client reset", act: func(t *testing.T, client, _ net.Conn, _ context.CancelFunc) {
			reset(t, client)
		}, by: relay.EndClient, errIs: syscall.ECONNRESET},
		{name: "upstream reset", act: func(t *testing.T, _, server net.Conn, _ context.CancelFunc) {
			reset(t, server)
		}, by: relay.EndUpstream, errIs: syscall.ECONNRESET, failure: true},
		{name: "client reset while the upstream streams", act: func(t *testing.T, client, server net.Conn, _ context.CancelFunc) {
			go stream(server)
			client.Read(make([]byte, 1)) // bytes are moving
			reset(t, client)
		}, by: relay.EndClient},
		{name: "upstream reset while the client streams", act: func(t *testing.T, client, server net.Conn, _ context.CancelFunc) {
			go stream(client)
			server.Read(make([]byte, 1))
			reset(t, server)
		}, by: relay.EndUpstream, failure: true},
		{name: "client EOF first", act: func(t *testing.T, client, server net.Conn, _ context.CancelFunc) {
			client.(*net.TCPConn).CloseWrite()
			drain(server) // the half-close came through
			server.Close()
			drain(client)
		}, by: relay.EndClient},
		{name: "upstream EOF first", act: func(t *testing.T, client, server net.Conn, _ context.CancelFunc) {
			server.(*net.TCPConn).CloseWrite()
			drain(client)
			client.Close()
			drain(server)
		}, by: relay.EndUpstream},
		{name: "upstream reset after the client's EOF", act: func(t *testing.T, client, server net.Conn, _ context.CancelFunc) {
			client.(*net.TCPConn).CloseWrite()
			drain(server)
			reset(t, server)
		}, by: relay.EndUpstream, errIs: syscall.ECONNRESET, failure: true},
		{name: "idle", idle: idle, act: func(*testing.T, net.Conn, net.Conn, context.CancelFunc) {},
			by: relay.EndIdle, errIs: relay.ErrIdle},
		{name: "owner stop", act: func(_ *testing.T, _, _ net.Conn, stop context.CancelFunc) {
			time.Sleep(20 * time.Millisecond)
			stop()
		}, by: relay.EndStop, errIs: context.Canceled},
	} {
		for _, p := range paths {
			t.Run(sc.name+"/"+p.name, func(t *testing.T) {
				a, b, client, server := pairs(t, p.mode)
				up := &endHeard{Conn: b}
				ctx, stop := context.WithCancel(context.Background())
				defer stop()
				idleFor := sc.idle
				if idleFor == 0 {
					idleFor = time.Minute
				}
				done := make(chan relay.Result, 1)
				go func() { done <- relay.Pipe(ctx, a, up, idleFor) }()
				sc.act(t, client, server, stop)
				res := wait(t, done, "the relay")
				e := res.End
				if e.By != sc.by || e.Failure != sc.failure {
					t.Fatalf("end %v (failure %v, error %v), want %v (failure %v)", e.By, e.Failure, e.Err, sc.by, sc.failure)
				}
				switch {
				case sc.errIs != nil && !errors.Is(e.Err, sc.errIs):
					t.Fatalf("end error %v, want one matching %v", e.Err, sc.errIs)
				case sc.errIs == nil && sc.failure == false && sc.by != relay.EndClient && e.Err != nil:
					t.Fatalf("end error %v, want none", e.Err)
				}
				if sc.name == "client EOF first" || sc.name == "upstream EOF first" {
					if e.Err != nil {
						t.Fatalf("a clean end with error %v", e.Err)
					}
				}
				heard := up.heard()
				if len(heard) != 1 || heard[0] != e {
					t.Fatalf("the observer heard %v, want once %v", heard, e)
				}
				if p.mode == bothTCP && (res.PathAToB != relay.PathSplice || res.PathBToA != relay.PathSplice) {
					t.Fatalf("paths %v and %v: the observer stopped the splice", res.PathAToB, res.PathBToA)
				}
			})
		}
	}
}

// A conn closed beneath the relay by its owner (a kill, a drain) is an
// owner's stop, not an upstream failure.
func TestAConnClosedBeneathTheRelayIsAStop(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			a, b, _, _ := pairs(t, p.mode)
			up := &endHeard{Conn: b}
			done := relayed(a, up, time.Minute)
			time.Sleep(20 * time.Millisecond)
			b.Close()
			e := wait(t, done, "the relay").End
			if e.By != relay.EndStop || e.Failure || !errors.Is(e.Err, net.ErrClosed) {
				t.Fatalf("end %v (failure %v, error %v), want a stop", e.By, e.Failure, e.Err)
			}
		})
	}
}

// The observer is found beneath wrappers that expose the conn they wrap.
func TestTheObserverIsFoundBeneathWrappers(t *testing.T) {
	a, b, client, _ := pairs(t, bothTCP)
	up := &endHeard{Conn: b}
	done := relayed(a, &counting{Conn: up}, time.Minute)
	reset(t, client)
	wait(t, done, "the relay")
	if heard := up.heard(); len(heard) != 1 || heard[0].By != relay.EndClient {
		t.Fatalf("heard %v", heard)
	}
}

func TestClassify(t *testing.T) {
	other := errors.New("bad frame")
	for _, tc := range []struct {
		by      relay.Cause
		err     error
		wantBy  relay.Cause
		failure bool
	}{
		{relay.EndClient, nil, relay.EndClient, false},
		{relay.EndUpstream, nil, relay.EndUpstream, false},
		{relay.EndIdle, relay.ErrIdle, relay.EndIdle, false},
		{relay.EndStop, context.Canceled, relay.EndStop, false},
		{relay.EndClient, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, relay.EndClient, false},
		{relay.EndClient, syscall.ECONNABORTED, relay.EndClient, false},
		{relay.EndClient, &net.OpError{Op: "write", Err: syscall.EPIPE}, relay.EndClient, false},
		{relay.EndClient, syscall.ENOTCONN, relay.EndClient, false},
		{relay.EndClient, syscall.ETIMEDOUT, relay.EndClient, false},
		{relay.EndClient, syscall.EHOSTUNREACH, relay.EndClient, false},
		{relay.EndClient, syscall.ENETUNREACH, relay.EndClient, false},
		{relay.EndClient, io.ErrUnexpectedEOF, relay.EndClient, false},
		{relay.EndClient, &net.OpError{Op: "write", Err: os.ErrDeadlineExceeded}, relay.EndClient, false},
		{relay.EndClient, other, relay.EndClient, true},
		{relay.EndUpstream, syscall.ECONNRESET, relay.EndUpstream, true},
		{relay.EndUpstream, syscall.EPIPE, relay.EndUpstream, true},
		{relay.EndUpstream, io.ErrUnexpectedEOF, relay.EndUpstream, true},
		{relay.EndUpstream, syscall.ETIMEDOUT, relay.EndUpstream, true},
		{relay.EndUpstream, other, relay.EndUpstream, true},
		{relay.EndUpstream, net.ErrClosed, relay.EndStop, false},
		{relay.EndClient, &net.OpError{Op: "read", Err: net.ErrClosed}, relay.EndStop, false},
	} {
		e := relay.Classify(tc.by, tc.err)
		if e.By != tc.wantBy || e.Failure != tc.failure || e.Err != tc.err {
			t.Errorf("Classify(%v, %v) = %+v, want by %v, failure %v", tc.by, tc.err, e, tc.wantBy, tc.failure)
		}
	}
}
