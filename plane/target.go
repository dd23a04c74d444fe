package plane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"switchyard/netx"
	"switchyard/outbound"
)

// OutboundID names one version of an outbound: tag@vN. Sub-links, guards and
// tracked flows are keyed by it, never by the address of a target.
type OutboundID struct {
	Tag     string
	Version uint32
}

func (id OutboundID) String() string { return fmt.Sprintf("%s@v%d", id.Tag, id.Version) }

// ErrDrained ends a flow whose outbound version was closed by a drain.
var ErrDrained = errors.New("the outbound this flow was opened on was drained")

// Target is what a route names: one outbound version. Every stream and link
// opened through it is guarded, so closing the target's flows (a drain with
// close) ends them.
type Target struct {
	id  OutboundID
	out outbound.Outbound // nil for a selector target
	sel Selector          // set for a balancer: it picks a leaf per flow

	mu      sync.Mutex // guards closed, retired and flows
	closed  bool
	retired bool
	flows   map[closer]struct{}
	release sync.Once // closes the outbound once retired and idle
}

type closer interface{ drain() }

// NewTarget wraps an outbound built at id.
func NewTarget(id OutboundID, out outbound.Outbound) *Target {
	return &Target{id: id, out: out, flows: make(map[closer]struct{})}
}

// Selector picks the leaf target of each flow or packet: a balancer.
type Selector interface {
	// SelectPreferring returns a member target; prefer is the version an
	// association already uses, or nil.
	SelectPreferring(prefer *OutboundID) *Target
}

// NewSelectorTarget is the target of a balancer named id. It is never
// drained itself: flows through it are guarded by the member they go to.
func NewSelectorTarget(id OutboundID, s Selector) *Target {
	return &Target{id: id, sel: s, flows: make(map[closer]struct{})}
}

// IsSelector reports whether the target is a balancer.
func (t *Target) IsSelector() bool { return t.sel != nil }

// ID is the outbound version of the target.
func (t *Target) ID() OutboundID { return t.id }

// Outbound is the outbound the target opens flows on; nil for a selector.
func (t *Target) Outbound() outbound.Outbound { return t.out }

// Resolve returns the leaf target a flow or packet goes to. prefer is the
// version an association already uses, or nil. An outbound target is its
// own leaf; a balancer picks a member now.
func (t *Target) Resolve(prefer *OutboundID) *Target {
	if t.sel != nil {
		return t.sel.SelectPreferring(prefer)
	}
	return t
}

// leaf resolves t for a dial that was not resolved by its caller.
func (t *Target) leaf() (*Target, error) {
	l := t.Resolve(nil)
	if l.sel != nil {
		return nil, fmt.Errorf("balancer member %s is itself a balancer", l.id)
	}
	return l, nil
}

// DialStream opens a TCP flow on the target's outbound (a balancer's chosen
// member) and guards it by that outbound version.
func (t *Target) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if t.sel != nil {
		l, err := t.leaf()
		if err != nil {
			return nil, err
		}
		return l.DialStream(ctx, f)
	}
	c, err := t.out.DialStream(ctx, f)
	if err != nil {
		return nil, err
	}
	g := &guardedConn{Conn: c, t: t}
	if !t.add(g) {
		c.Close()
		return nil, ErrDrained
	}
	return g, nil
}

// DialPacket opens a datagram link on the target's outbound and guards it.
func (t *Target) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if t.sel != nil {
		l, err := t.leaf()
		if err != nil {
			return nil, err
		}
		return l.DialPacket(ctx, f)
	}
	l, err := t.out.DialPacket(ctx, f)
	if err != nil {
		return nil, err
	}
	g := &guardedLink{link: l, t: t}
	if !t.add(g) {
		l.Close()
		return nil, ErrDrained
	}
	return g, nil
}

// CloseFlows ends every flow opened on this target, now and later, with
// ErrDrained.
func (t *Target) CloseFlows() {
	t.mu.Lock()
	t.closed = true
	flows := t.flows
	t.flows = make(map[closer]struct{})
	t.mu.Unlock()
	for f := range flows {
		f.drain()
	}
}

// Flows is the number of live flows opened on the target.
func (t *Target) Flows() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.flows)
}

func (t *Target) add(c closer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.flows[c] = struct{}{}
	return true
}

func (t *Target) remove(c closer) {
	t.mu.Lock()
	delete(t.flows, c)
	idle := t.retired && len(t.flows) == 0
	t.mu.Unlock()
	if idle {
		t.closeOutbound()
	}
}

// Retire marks the target as no longer routed to: once its last flow ends
// (at once when it has none) the outbound's own resources — a QUIC
// connection, a tunnel — are released, if it holds any (io.Closer).
func (t *Target) Retire() {
	t.mu.Lock()
	t.retired = true
	idle := len(t.flows) == 0
	t.mu.Unlock()
	if idle {
		t.closeOutbound()
	}
}

func (t *Target) closeOutbound() {
	t.release.Do(func() {
		if c, ok := t.out.(io.Closer); ok {
			c.Close()
		}
	})
}
