package track_test

import (
	"strconv"
	"sync"
	"testing"

	"switchyard/netx"
	"switchyard/track"
)

func totalsOf(t *testing.T, tr *track.Tracker, outbound string) track.Totals {
	t.Helper()
	var sum track.Totals
	for _, s := range tr.Totals() {
		if s.Outbound == outbound {
			sum.Open += s.Open
			sum.Flows += s.Flows
			sum.Up += s.Up
			sum.Down += s.Down
		}
	}
	return sum
}

// The totals per outbound tag keep the flows and bytes of the flows that
// ended (closed or killed) beside the live ones', versions folded into
// their tag; forgetting a tag starts its totals over.
func TestTotalsKeepEndedFlowsByOutboundTag(t *testing.T) {
	tr := track.New()
	a := tr.Conn(tcpMeta(), &countConn{}) // proxy@v2
	a.Write(make([]byte, 10))
	a.Read(make([]byte, 100))
	m := tcpMeta()
	m.Outbound = "proxy@v3"
	b := tr.Conn(m, &countConn{})
	b.Write(make([]byte, 1))
	if got := totalsOf(t, tr, "proxy"); got.Open != 2 || got.Flows != 2 || got.Up != 11 || got.Down != 100 {
		t.Fatalf("live totals %+v", got)
	}
	a.Close()
	if got := totalsOf(t, tr, "proxy"); got.Open != 1 || got.Flows != 2 || got.Up != 11 || got.Down != 100 {
		t.Fatalf("after one closed %+v", got)
	}
	if !tr.Kill(b.ID()) {
		t.Fatal("no flow killed")
	}
	if got := totalsOf(t, tr, "proxy"); got.Open != 0 || got.Flows != 2 || got.Up != 11 || got.Down != 100 {
		t.Fatalf("after the kill %+v", got)
	}
	for _, s := range tr.Totals() {
		if s.Network != netx.TCP || s.Inbound != "socks-in" {
			t.Fatalf("keyed as %+v", s)
		}
	}
	tr.Forget(func(_, tag string) bool { return tag != "proxy" })
	if got := tr.Totals(); len(got) != 0 {
		t.Fatalf("totals after forgetting: %+v", got)
	}
}

func TestOutboundTag(t *testing.T) {
	for in, want := range map[string]string{"hk@v2": "hk", "a@b@v10": "a@b", "plain": "plain"} {
		if got := track.OutboundTag(in); got != want {
			t.Errorf("OutboundTag(%q) = %q, want %q", in, got, want)
		}
	}
}

// While flows open, move bytes and close (or are killed) concurrently,
// no read of the totals ever goes back: each flow counts once, live or
// ended.
func TestTotalsNeverGoBack(t *testing.T) {
	tr := track.New()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := tcpMeta()
				m.Outbound = "proxy@v" + strconv.Itoa(w%2+1)
				c := tr.Conn(m, &countConn{})
				c.Write(make([]byte, 3))
				c.Read(make([]byte, 2))
				if i%3 == 0 {
					tr.Kill(c.ID())
				} else {
					c.Close()
				}
			}
		})
	}
	var last track.Totals
	for range 2000 {
		got := totalsOf(t, tr, "proxy")
		if got.Flows < last.Flows || got.Up < last.Up || got.Down < last.Down {
			close(stop)
			wg.Wait()
			t.Fatalf("totals went back: %+v after %+v", got, last)
		}
		last = got
	}
	close(stop)
	wg.Wait()
	if got := totalsOf(t, tr, "proxy"); got.Open != 0 || got.Up != 3*int64(got.Flows) || got.Down != 2*int64(got.Flows) {
		t.Fatalf("after every flow ended: %+v", got)
	}
}
