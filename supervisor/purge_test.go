package supervisor

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// purgeCounter is an outbound that counts its purges.
type purgeCounter struct {
	outbound.Outbound
	purges atomic.Int32
}

func (p *purgeCounter) Purge() { p.purges.Add(1) }

// A node's death purges its outbound through the wrappers around it, and
// only its own.
func TestNodeDeathPurgesThroughWrappers(t *testing.T) {
	var counter *purgeCounter
	wrap := func(o spec.Outbound, out outbound.Outbound) outbound.Outbound {
		if o.Tag != "direct" {
			return &closable{inner: out}
		}
		counter = &purgeCounter{Outbound: out}
		return &closable{inner: probed{counter, netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 9}}}
	}
	sv, _ := run(t, baseSpec(), Options{wrap: wrap})
	ids := *sv.nodeIDs.Load()
	sv.nodeDied(ids["direct2"], "direct2")
	if n := counter.purges.Load(); n != 0 {
		t.Fatalf("another node's death purged direct %d times", n)
	}
	sv.nodeDied(ids["direct"], "direct")
	if n := counter.purges.Load(); n != 1 {
		t.Fatalf("direct's death purged it %d times, want 1", n)
	}
}
