package supervisor

import (
	"slices"
	"sync"
	"testing"
	"time"

	"switchyard/relay"
	"switchyard/test/socksclient"
	"switchyard/track"
)

// A TCP flow is tracked with its selection chain, and once its relay
// returns, Options.FlowEnded hears how it ended, with that meta.
func TestATCPFlowIsTrackedWithItsChainAndReportsItsEnd(t *testing.T) {
	var (
		mu    sync.Mutex
		metas []track.Meta
		ends  []relay.End
	)
	sv, proxy := run(t, baseSpec(), Options{FlowEnded: func(m track.Meta, e relay.End) {
		mu.Lock()
		metas, ends = append(metas, m), append(ends, e)
		mu.Unlock()
	}})
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := echoOnce(c, "hello"); err != nil {
		t.Fatal(err)
	}
	flows := sv.Tracker().Flows()
	if len(flows) != 1 || !slices.Equal(flows[0].Chain, []string{"direct"}) {
		t.Fatalf("flows %+v, want one with the chain [direct]", flows)
	}
	c.Close()
	eventually(t, "the flow's end to be reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ends) > 0
	})
	time.Sleep(20 * time.Millisecond) // room for a second, wrong, report
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 1 {
		t.Fatalf("%d ends reported", len(ends))
	}
	if e := ends[0]; e.By != relay.EndClient || e.Failure {
		t.Fatalf("end %v (failure %v, error %v), want the client's, no failure", e.By, e.Failure, e.Err)
	}
	if m := metas[0]; !slices.Equal(m.Chain, []string{"direct"}) || m.Outbound != "direct@v1" {
		t.Fatalf("reported with meta %+v", m)
	}
}
