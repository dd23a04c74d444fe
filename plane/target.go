package plane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

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

// ErrDrained ends a flow whose outbound version was closed by a drain. It
// matches net.ErrClosed too: the flow's conn or link was closed, by its
// owner, so a relay takes the end for an owner's stop and not for a failure
// of the upstream.
var ErrDrained error = drainedError{}

type drainedError struct{}

func (drainedError) Error() string        { return "the outbound this flow was opened on was drained" }
func (drainedError) Is(target error) bool { return target == net.ErrClosed }

// ErrRetired is the error of a dial on an outbound version a reload retired
// and released before the dial began: the dial loaded the plane just
// before the swap. The caller dials again on the plane now published.
var ErrRetired = errors.New("the outbound version was retired by a reload")

// Reloaded reports whether err is the failure of a dial that a reload
// overtook: its version was retired before it began (ErrRetired), or its
// flows were closed by a drain while it ran (ErrDrained). Such a dial is
// retried once on the plane now published; it never fails for that.
func Reloaded(err error) bool {
	return errors.Is(err, ErrRetired) || errors.Is(err, ErrDrained)
}

// Target is what a route names: one outbound version. Every stream and link
// opened through it is guarded, so closing the target's flows (a drain with
// close) ends them.
type Target struct {
	id  OutboundID
	out outbound.Outbound // nil for a chooser target
	ch  Chooser           // set for a balancer or a group: it picks a leaf per flow
	// node is the outbound's node identity (set before publication).
	node [16]byte

	mu       sync.Mutex // guards closed, retired, released, dialing and flows
	closed   bool
	retired  bool
	released bool // the outbound's resources were released: no dial begins
	dialing  int  // dials begun and not yet returned
	flows    map[closer]struct{}
}

type closer interface{ drain() }

// NewTarget wraps an outbound built at id.
func NewTarget(id OutboundID, out outbound.Outbound) *Target {
	return &Target{id: id, out: out, flows: make(map[closer]struct{})}
}

// MaxGroupDepth bounds nested resolution: a chain from a route target
// through sub-groups to a leaf has at most this many choosers.
const MaxGroupDepth = 8

// Query is what the selection of one flow or packet reads, and the chain it
// took. The caller fills Network, Family, Dst and Prefer; Resolve records
// the chain. A Query is reused from flow to flow (an association keeps
// one), so selecting through it allocates nothing.
type Query struct {
	Network netx.Network
	// Family is the health family asked about: the address family of the
	// connection to the proxy server (V4 unless a retry asks for V6).
	Family netx.Family
	Dst    netx.Addr   // the flow's (the packet's) destination
	Prefer *OutboundID // the leaf version the association already uses, or nil
	// Chain[:Depth] is the selection chain Resolve took: the route
	// target's tag, each selected sub-group's, then the leaf's.
	Chain [MaxGroupDepth + 2]string
	Depth int
	// Attempts are the Score attempts the selection made (one per Score
	// group traversed); the dialer begins or releases every one.
	Attempts Attempts
	// Exclude, set by a Score retry, is the node whose setup just failed:
	// no Score group on the walk chooses it again. Retry marks that walk
	// as the flow's one sequential retry (it earns no trial currency).
	Exclude [16]byte
	Retry   bool
	// Peek asks which leaf a flow would take without selecting: a Score
	// group ranks readonly (no attempt, no counter, no reservation).
	Peek bool
}

// Push appends tag to the chain; past its bound it reports false and the
// chooser refuses the walk.
func (q *Query) Push(tag string) bool {
	if q.Depth >= len(q.Chain) {
		return false
	}
	q.Chain[q.Depth] = tag
	q.Depth++
	return true
}

// Path is the chain as a new slice, for what keeps it (the flow table).
func (q *Query) Path() []string { return append([]string(nil), q.Chain[:q.Depth]...) }

// A Chooser picks the leaf target of each flow or packet: a balancer or a
// group.
type Chooser interface {
	// Choose returns the leaf (an outbound target) q goes to, or nil when
	// no member is eligible and there is no final: the flow is refused
	// with ErrNoLeaf. It pushes the tags of the sub-groups it walks; its
	// own tag is pushed by Resolve.
	Choose(q *Query) *Target
}

// A Retrier is a Chooser whose pick may be retried on other leaves after a
// setup failure (URLTest's one retry round).
type Retrier interface {
	// Retry returns the leaves to try, in order, after failed (the leaf q
	// resolved to) failed to set up; nil when the pick is authoritative.
	Retry(q *Query, failed *Target) []*Target
}

// Retry returns the leaves to try after q's leaf failed to set up, when
// the target's chooser retries (see Retrier); nil otherwise.
func (t *Target) Retry(q *Query, failed *Target) []*Target {
	if r, ok := t.ch.(Retrier); ok {
		return r.Retry(q, failed)
	}
	return nil
}

// SetNode gives an outbound target its node identity (the health engine's
// key), before the target is published.
func (t *Target) SetNode(id [16]byte) { t.node = id }

// Node is the target's node identity; zero for a chooser or an outbound
// given none.
func (t *Target) Node() [16]byte { return t.node }

// ErrNoLeaf refuses a flow whose group has no eligible member and no final.
var ErrNoLeaf = errors.New("no eligible member")

// NewChooserTarget is the target of a balancer or group named id. It is
// never drained itself: flows through it are guarded by the leaf they go
// to.
func NewChooserTarget(id OutboundID, c Chooser) *Target {
	return &Target{id: id, ch: c, flows: make(map[closer]struct{})}
}

// IsChooser reports whether the target is a balancer or a group.
func (t *Target) IsChooser() bool { return t.ch != nil }

// ID is the outbound version of the target.
func (t *Target) ID() OutboundID { return t.id }

// Outbound is the outbound the target opens flows on; nil for a chooser.
func (t *Target) Outbound() outbound.Outbound { return t.out }

// CarriesUDP reports whether the target's outbound carries datagrams as
// configured (outbound.Networks), so a target passes it on as any wrapper
// of an outbound does. A chooser target reports true: which of its members
// can carry a packet is its Chooser's to say when it chooses.
func (t *Target) CarriesUDP() bool { return t.ch != nil || outbound.CarriesUDP(t.out) }

// Resolve returns the leaf target a flow or packet goes to, and records
// the chain in q (reset first). An outbound target is its own leaf; a
// balancer or group picks one now. nil: no eligible leaf (ErrNoLeaf).
func (t *Target) Resolve(q *Query) *Target {
	q.Depth = 0
	q.Push(t.id.Tag)
	if t.ch == nil {
		return t
	}
	l := t.ch.Choose(q)
	if l == nil || l.ch != nil {
		return nil
	}
	if q.Chain[q.Depth-1] != l.id.Tag {
		q.Push(l.id.Tag)
	}
	return l
}

// leaf resolves t for a dial that was not resolved by its caller.
func (t *Target) leaf(network netx.Network, f netx.Flow) (*Target, error) {
	q := Query{Network: network, Dst: f.Dst}
	l := t.Resolve(&q)
	// A dial its caller did not resolve reports to no Score attempt.
	q.Attempts.Release(time.Now())
	if l == nil {
		return nil, fmt.Errorf("%s: %w", t.id.Tag, ErrNoLeaf)
	}
	return l, nil
}

// DialStream opens a TCP flow on the target's outbound (a balancer's chosen
// member) and guards it by that outbound version.
func (t *Target) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if t.ch != nil {
		l, err := t.leaf(netx.TCP, f)
		if err != nil {
			return nil, err
		}
		return l.DialStream(ctx, f)
	}
	if !t.begin() {
		return nil, ErrRetired
	}
	c, err := t.out.DialStream(ctx, f)
	if err != nil {
		t.end(nil)
		return nil, err
	}
	g := &guardedConn{Conn: c, t: t}
	if !t.end(g) {
		c.Close()
		return nil, ErrDrained
	}
	return g, nil
}

// DialPacket opens a datagram link on the target's outbound and guards it.
func (t *Target) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if t.ch != nil {
		l, err := t.leaf(netx.UDP, f)
		if err != nil {
			return nil, err
		}
		return l.DialPacket(ctx, f)
	}
	if !t.begin() {
		return nil, ErrRetired
	}
	l, err := t.out.DialPacket(ctx, f)
	if err != nil {
		t.end(nil)
		return nil, err
	}
	g := &guardedLink{link: l, t: t}
	if !t.end(g) {
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

// begin counts a dial in: a retired version is not released while one
// runs. It fails once the version was released.
func (t *Target) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released {
		return false
	}
	t.dialing++
	return true
}

// end counts a dial out and files its flow c (nil for a failed dial); it
// fails when the target's flows were closed meanwhile.
func (t *Target) end(c closer) bool {
	t.mu.Lock()
	t.dialing--
	ok := !t.closed
	if ok && c != nil {
		t.flows[c] = struct{}{}
	}
	release := t.releasable()
	t.mu.Unlock()
	if release {
		t.closeOutbound()
	}
	return ok
}

func (t *Target) remove(c closer) {
	t.mu.Lock()
	delete(t.flows, c)
	release := t.releasable()
	t.mu.Unlock()
	if release {
		t.closeOutbound()
	}
}

// Retire marks the target as no longer routed to: once its last flow ended
// and no dial on it runs (at once when there are none) the outbound's own
// resources — a QUIC connection, a tunnel, an HTTP/2 connection — are
// released, if it holds any (io.Closer). A dial that begins after that
// fails with ErrRetired.
func (t *Target) Retire() {
	t.mu.Lock()
	t.retired = true
	release := t.releasable()
	t.mu.Unlock()
	if release {
		t.closeOutbound()
	}
}

// releasable reports, once, that a retired target has no flow and no dial
// left: the caller releases the outbound. t.mu is held.
func (t *Target) releasable() bool {
	if !t.retired || t.released || len(t.flows) > 0 || t.dialing > 0 {
		return false
	}
	t.released = true
	return true
}

func (t *Target) closeOutbound() {
	if c, ok := t.out.(io.Closer); ok {
		c.Close()
	}
}
