package track_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"switchyard/relay"
	"switchyard/track"
)

// hidden keeps the relay from reaching the TCP conn beneath (it is no
// netx.Observed), so it copies in userspace; it keeps CloseWrite.
type hidden struct{ *net.TCPConn }

// heard collects what an OnEnd hook is told.
type heard struct {
	mu   sync.Mutex
	ends []relay.End
}

func (h *heard) hook(e relay.End) {
	h.mu.Lock()
	h.ends = append(h.ends, e)
	h.mu.Unlock()
}

func (h *heard) got() []relay.End {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]relay.End(nil), h.ends...)
}

// The relay over a tracked upstream tells the conn's OnEnd hook how the
// flow ended, once, over the splice path and the userspace one; a flow
// killed or interrupted through the tracker ends as its owner's stop.
func TestTheEndHookHearsTheRelay(t *testing.T) {
	for _, path := range []struct {
		name string
		wrap func(*net.TCPConn) net.Conn
		want relay.Path
	}{
		{"splice", func(c *net.TCPConn) net.Conn { return c }, relay.PathSplice},
		{"userspace", func(c *net.TCPConn) net.Conn { return hidden{c} }, relay.PathCopy},
	} {
		for _, sc := range []struct {
			name    string
			end     func(tr *track.Tracker, up *track.Conn, client, server *net.TCPConn)
			by      relay.Cause
			failure bool
		}{
			{"client reset", func(_ *track.Tracker, _ *track.Conn, client, _ *net.TCPConn) {
				client.SetLinger(0)
				client.Close()
			}, relay.EndClient, false},
			{"upstream reset", func(_ *track.Tracker, _ *track.Conn, _, server *net.TCPConn) {
				server.SetLinger(0)
				server.Close()
			}, relay.EndUpstream, true},
			{"kill", func(tr *track.Tracker, up *track.Conn, _, _ *net.TCPConn) {
				tr.Kill(up.ID())
			}, relay.EndStop, false},
			{"interrupt", func(tr *track.Tracker, _ *track.Conn, _, _ *net.TCPConn) {
				if n := tr.Interrupt(through("auto")); n != 1 {
					t.Errorf("Interrupt closed %d flows", n)
				}
			}, relay.EndStop, false},
		} {
			t.Run(path.name+"/"+sc.name, func(t *testing.T) {
				client, inbound := tcpPair(t)
				upstream, server := tcpPair(t)
				tr := track.New()
				var h heard
				up := tr.Conn(tcpMeta(), path.wrap(upstream), track.OnEnd(h.hook))
				done := make(chan relay.Result, 1)
				go func() { done <- relay.Pipe(context.Background(), path.wrap(inbound), up, time.Minute) }()
				// Bytes move both ways before the end.
				client.Write([]byte("ping"))
				server.Read(make([]byte, 4))
				server.Write([]byte("pong"))
				client.Read(make([]byte, 4))
				sc.end(tr, up, client, server)
				var res relay.Result
				select {
				case res = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("the relay did not end")
				}
				if res.PathAToB != path.want || res.PathBToA != path.want {
					t.Fatalf("paths %v and %v, want %v", res.PathAToB, res.PathBToA, path.want)
				}
				e := res.End
				if e.By != sc.by || e.Failure != sc.failure {
					t.Fatalf("end %v (failure %v, error %v), want %v (failure %v)", e.By, e.Failure, e.Err, sc.by, sc.failure)
				}
				if sc.by == relay.EndStop && !errors.Is(e.Err, net.ErrClosed) {
					t.Fatalf("a stop with error %v", e.Err)
				}
				if got := h.got(); len(got) != 1 || got[0] != e {
					t.Fatalf("the hook heard %v, want once %v", got, e)
				}
				up.FlowEnded(e)
				if got := h.got(); len(got) != 1 {
					t.Fatalf("the hook heard %d ends", len(got))
				}
			})
		}
	}
}

// A conn made without a hook takes the relay's End and does nothing.
func TestAConnWithoutAHookTakesTheEnd(t *testing.T) {
	tr := track.New()
	c := tr.Conn(tcpMeta(), &countConn{})
	c.FlowEnded(relay.End{By: relay.EndClient})
	c.Close()
}
