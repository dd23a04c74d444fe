package group

import (
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

// Health is what the groups read of node health. The integrator adapts the
// health engine to it; every method is a cheap in-memory read (the
// selection path calls them per flow and per packet) and none calls back
// into the Manager.
type Health interface {
	// Alive reports the state of one domain of a node for one family.
	Alive(id health.NodeID, d health.Domain, f netx.Family) bool
	// UDPEligible: DataUDP or DNSUDP alive -> true; both explicitly dead
	// -> false; no UDP state recorded -> the node's TCP liveness.
	UDPEligible(id health.NodeID, f netx.Family) bool
	// HasUDPState reports whether any UDP observation was recorded for the
	// node and family.
	HasUDPState(id health.NodeID, f netx.Family) bool
	// Latency is the halving moving average of the real samples of one
	// domain; false when there is none.
	Latency(id health.NodeID, d health.Domain, f netx.Family) (time.Duration, bool)
	// URLLatency and URLAlive are the state of a group's check_url probe
	// of one member, keyed by (member tag, url).
	URLLatency(member, url string) (time.Duration, bool)
	URLAlive(member, url string) bool
	// Strikes is the number of pending real dial-failure strikes.
	Strikes(id health.NodeID) int
	// Epoch moves on every change any read above could show.
	Epoch() uint64
	// Selected tells that a real selection went through group: it wakes
	// the group's probing.
	Selected(group string)
}

// Leaf is one outbound a group may reach, as the integrator built it.
type Leaf struct {
	Tag    string
	Node   health.NodeID // health identity; zero for an outbound health does not track
	Target *plane.Target // the outbound version the plane holds under Tag
	UDP    bool          // can carry UDP (a capability known before any dial)
	Block  bool          // a terminal action: eligible for both networks, never filtered
	// Incarnation changes when the node's configuration changed (the
	// health engine's, health.Node): Score evidence of an older one is
	// fenced.
	Incarnation uint64
}

// Identity is a group's UUID and creation time. The supervisor keeps it
// across reloads while the group's name is unchanged.
type Identity struct {
	ID      [16]byte
	Created time.Time
}

// Options are the Manager's dependencies and callbacks. Every callback is
// called without any lock of the Manager or its groups held.
type Options struct {
	// Health is read by every selection; nil reads every node as alive
	// and unmeasured.
	Health Health
	Log    *slog.Logger
	Now    func() time.Time // nil: time.Now
	// Versions is the version of each group's chooser target
	// (plane.OutboundID); a group missing from it is at version 1.
	Versions map[string]uint32

	// Score is the process's Score engine: every Score group ranks with
	// it, and the supervisor configures it with ConfigureScore as it
	// publishes the Manager. nil: a Manager with Score groups makes an
	// engine of its own, configured at once (tests, a standalone check).
	Score *score.Engine

	// OnInterrupt closes the flows that went through group's old member
	// on network and returns how many it closed, once they are closed.
	OnInterrupt func(group, member string, network netx.Network) int
	// OnPersist stores a Selector's changed choice for one network.
	OnPersist func(group string, network netx.Network, member string)
	// OnConnectivity publishes a change of a group's connectivity slot for
	// one domain and family (the eBPF admission slot).
	OnConnectivity func(group string, d health.Domain, f netx.Family, alive bool)
	// OnSwitch hears every change of a group's effective member on a
	// network, with its reason (switch.go): a Selector write, a URLTest
	// winner or a Fallback pin that moved. It is called on the goroutine
	// that made the change, a selecting one included: it must be cheap
	// and must not block.
	OnSwitch func(group string, network netx.Network, reason SwitchReason)
}

// Errors of Select and Restore, matched with errors.Is.
var (
	ErrUnknownGroup = errors.New("no such group")
	ErrNotSelector  = errors.New("not a selector")
	ErrNotMember    = errors.New("not a member")
	// ErrReplaced refuses a write to a Manager that a reload already
	// migrated from: the caller writes to the Manager now published.
	ErrReplaced = errors.New("the group manager was replaced by a reload")
)

type policy uint8

const (
	selector policy = iota
	urltest
	fallback
	loadbalance
	scoring
)

var policyNames = [...]string{"selector", "urltest", "fallback", "loadbalance", "score"}

func (p policy) String() string { return policyNames[p] }

type kind uint8

const (
	kindLeaf kind = iota
	kindBalancer
	kindGroup
)

var kindNames = [...]string{"outbound", "balancer", "group"}

// edge is a member or a final: an outbound, a balancer or a group.
type edge struct {
	tag  string
	kind kind
	idx  int32         // leaf or group index
	bal  *plane.Target // kindBalancer
	cut  bool          // closes a cycle: cut at construction
}

// Leaf indices have two special values beside the real ones.
const (
	none   int32 = -1 // no leaf
	opaque int32 = -2 // a leaf behind a balancer, not known without asking it
	many   int32 = -3 // (closures) more than one leaf
)

// urlCache is one (network, family) URLTest winner and the state it was
// computed at.
type urlCache struct {
	win      atomic.Int32
	prev     atomic.Int32 // the incumbent the winner was ranked against (Explain)
	epoch    atomic.Uint64
	gen      atomic.Uint64
	computed atomic.Bool
	busy     atomic.Bool // single flight of the recompute
	// cold: no eligible candidate had ranking evidence at the last rank
	// (the association's prepared UDP leaf is kept: coldudp.go).
	cold atomic.Bool
}

// pin is one (network, family) Fallback pin.
type pin struct {
	idx   atomic.Int32
	since atomic.Int64 // unix nanoseconds
}

type grp struct {
	idx      int32
	tag      string
	pol      policy
	id       Identity
	interr   bool
	tol      time.Duration // effective tolerance
	url      string        // check_url in effect; "" for a selector
	idle     time.Duration
	members  []edge
	final    edge
	hasFinal bool  // a final is configured (even when missing or cut)
	finalOK  bool  // the final names something and is not cut
	def      int32 // the default member; none without members
	hasDef   bool  // the default is configured (not the first member by rule)
	target   *plane.Target

	choice [2]atomic.Int32 // selector: the runtime choice per network; none = unset
	cache  [2][2]urlCache  // urltest: per network and family
	pins   [2][2]pin       // fallback: per network and family
	cursor [2]atomic.Uint64
	sole   atomic.Int32 // the only leaf through the current choices, none or many
	warned atomic.Int64 // unix nanoseconds of the last last-resort warning

	closure []int32 // every leaf reachable through members and finals
	hasBal  bool    // a balancer is reachable (its leaves are not known here)
}

// Manager is one configuration's groups. It is built whole by New, filled
// with the old one's choices by Migrate, and read by the plane through
// Target. Selection (the Choose of each group's target) takes no lock and
// allocates nothing.
type Manager struct {
	groups    []grp
	byTag     map[string]int32
	leaves    []Leaf
	h         Health
	score     *score.Engine // nil without Score groups
	log       *slog.Logger
	now       func() time.Time
	o         Options
	gen       atomic.Uint64 // moves on every write the health epoch does not see
	ancestors map[health.NodeID][]int32

	mu       sync.Mutex // serializes choice writes and Migrate
	replaced bool

	conn connState
	work *worker
}

// chooser is a group as the plane sees it.
type chooser struct {
	m *Manager
	g int32
}

var _ plane.Chooser = (*chooser)(nil)

// New builds the groups of one configuration over the given leaves (every
// outbound, by tag) and balancers (each balancer's chooser target, by tag).
// ids are the groups' identities (a group missing from it gets a fresh
// one). It returns the warnings it also logged: cut cycles, nesting deeper
// than plane.MaxGroupDepth, a selector's ignored check_url, a missing final
// or default. A member naming nothing, an unknown policy and a tag naming
// two things are errors.
func New(groups []spec.Group, ids map[string]Identity, leaves map[string]Leaf, balancers map[string]*plane.Target, o Options) (*Manager, []string, error) {
	m := &Manager{h: o.Health, log: o.Log, now: o.Now, o: o}
	if m.h == nil {
		m.h = noHealth{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("component", "group")
	if m.now == nil {
		m.now = time.Now
	}
	b := builder{m: m, leaves: leaves, balancers: balancers, ids: ids}
	if err := b.build(groups); err != nil {
		return nil, nil, err
	}
	for _, w := range b.warnings {
		m.log.Warn(w)
	}
	m.conn.init(len(m.groups))
	m.score = o.Score
	if m.score == nil && len(m.ScoreGroups()) > 0 {
		m.score = score.NewEngine(clockFunc(m.now))
		m.ConfigureScore(m.now())
	}
	for i := range m.groups {
		g := &m.groups[i]
		v := uint32(1)
		if x, ok := o.Versions[g.tag]; ok {
			v = x
		}
		g.target = plane.NewChooserTarget(plane.OutboundID{Tag: g.tag, Version: v}, &chooser{m: m, g: int32(i)})
	}
	if o.OnInterrupt != nil {
		for i := range m.groups {
			if g := &m.groups[i]; g.interr && (g.pol == urltest || g.pol == fallback) {
				m.work = startWorker(m)
				break
			}
		}
	}
	return m, b.warnings, nil
}

// Close stops the Manager's interrupt worker and waits for it. Selection
// keeps working after Close (flows still resolving on an old plane); an
// automatic switch after it interrupts nothing.
func (m *Manager) Close() {
	if m.work != nil {
		m.work.close()
	}
}

// Target is the chooser target of the group tag for the plane, or nil.
func (m *Manager) Target(tag string) *plane.Target {
	if i, ok := m.byTag[tag]; ok {
		return m.groups[i].target
	}
	return nil
}

// Tags are the groups' tags in configuration order.
func (m *Manager) Tags() []string {
	out := make([]string, len(m.groups))
	for i := range m.groups {
		out[i] = m.groups[i].tag
	}
	return out
}

func freshIdentity(now time.Time) Identity {
	var id Identity
	rand.Read(id.ID[:])
	id.ID[6] = id.ID[6]&0x0f | 0x40 // version 4
	id.ID[8] = id.ID[8]&0x3f | 0x80 // RFC 4122 variant
	id.Created = now
	return id
}

// noHealth reads every node as alive and unmeasured.
type noHealth struct{}

func (noHealth) Alive(health.NodeID, health.Domain, netx.Family) bool { return true }
func (noHealth) UDPEligible(health.NodeID, netx.Family) bool          { return true }
func (noHealth) HasUDPState(health.NodeID, netx.Family) bool          { return false }
func (noHealth) URLAlive(string, string) bool                         { return true }
func (noHealth) URLLatency(string, string) (time.Duration, bool)      { return 0, false }
func (noHealth) Strikes(health.NodeID) int                            { return 0 }
func (noHealth) Epoch() uint64                                        { return 0 }
func (noHealth) Selected(string)                                      {}
func (noHealth) Latency(health.NodeID, health.Domain, netx.Family) (time.Duration, bool) {
	return 0, false
}

// clockFunc is a time source as the Score engine reads one.
type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }
