package plane_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/internal/slot"
	"switchyard/netx"
	"switchyard/plane"
)

// session is a fake shared session (a QUIC connection, a tunnel).
type session struct {
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool
}

func (s *session) Done() <-chan struct{} { return s.done }
func (s *session) Close() {
	s.once.Do(func() { s.closed.Store(true); close(s.done) })
}

// sessionOut is an outbound whose UDP links ride one session in a slot,
// as the session outbounds do: a speculative dial that finds none up
// brings up its own (slot.Slot.AcquireDetached) and commits it with its
// link. After the session, the link's own opening takes openDelay, or
// waits for the dial's end when hang.
type sessionOut struct {
	slot      *slot.Slot[*session]
	mu        sync.Mutex
	sessions  []*session
	openDelay time.Duration
	hang      bool
	ended     atomic.Bool
}

func newSessionOut() *sessionOut {
	o := &sessionOut{}
	o.slot = slot.New(slot.Config[*session]{Establish: func(context.Context) (*session, error) {
		s := &session{done: make(chan struct{})}
		o.mu.Lock()
		o.sessions = append(o.sessions, s)
		o.mu.Unlock()
		return s, nil
	}})
	return o
}

func (o *sessionOut) made() []*session {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*session(nil), o.sessions...)
}

func (o *sessionOut) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams")
}

func (o *sessionOut) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	defer o.ended.Store(true)
	acquire := o.slot.Acquire
	if netx.Speculative(ctx) {
		acquire = o.slot.AcquireDetached
	}
	r, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	wait := time.After(o.openDelay)
	if o.hang {
		wait = nil
	}
	select {
	case <-wait:
	case <-ctx.Done():
		r.Release()
		return nil, ctx.Err()
	}
	return &sessionLink{r: r, s: o.slot}, nil
}

type sessionLink struct {
	fakeLink
	r    *slot.Res[*session]
	s    *slot.Slot[*session]
	once sync.Once
}

func (l *sessionLink) Commit(context.Context) { l.s.Adopt(l.r) }
func (l *sessionLink) Close() error {
	l.once.Do(l.r.Release)
	return l.fakeLink.Close()
}

// coldSessionRig is coldRig over session outbounds.
func coldSessionRig(outs ...*sessionOut) *plane.Target {
	g := &coldGroup{ineligible: map[*plane.Target]bool{}}
	for i, o := range outs {
		g.leaves = append(g.leaves, plane.NewTarget(plane.OutboundID{Tag: string(rune('a' + i)), Version: 1}, o))
	}
	return plane.NewChooserTarget(plane.OutboundID{Tag: "auto", Version: 1}, g)
}

// After a cold preparation over session outbounds only the winner's
// session remains, and it is its outbound's shared one: the loser that
// had brought its session up closed it with its link, and its slot never
// held it.
func TestAColdPreparationLeavesOnlyTheWinnersSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	loser, winner := newSessionOut(), newSessionOut()
	defer loser.slot.Close()
	defer winner.slot.Close()
	loser.hang = true // its session comes up at once; its link never does
	via := coldSessionRig(loser, winner)
	p := &plane.Plane{}
	q := plane.Query{Network: netx.UDP}
	c, link, err := p.PreparePacket(context.Background(), via, &q, via.ColdCandidates(&q), netx.Flow{Network: netx.UDP}, func(l *plane.Target, _ netx.Phase, err error) {
		t.Errorf("%s reported: %v", l.ID(), err)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	if c.Leaf.ID().Tag != "b" {
		t.Fatalf("winner %s", c.Leaf.ID())
	}
	ls := loser.made()
	if len(ls) != 1 || !ls[0].closed.Load() {
		t.Fatalf("the loser's sessions: %d made, want 1 closed", len(ls))
	}
	if st := loser.slot.State(); st.Phase != slot.Idle || st.Gen != 0 || st.Detached != 0 || st.Failures != 0 {
		t.Fatalf("the loser's slot: %+v", st)
	}
	if st := winner.slot.State(); st.Phase != slot.Up || st.Gen != 1 || st.Holds != 1 {
		t.Fatalf("the winner's slot: %+v, want its session committed", st)
	}
	// The next flow through the winner rides the committed session.
	next, err := c.Leaf.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	next.Close()
	if ws := winner.made(); len(ws) != 1 || ws[0].closed.Load() {
		t.Fatalf("the winner's sessions: %d made", len(ws))
	}
}

// A candidate cancelled before its session is up leaves none behind.
func TestAColdPreparationCancelsTheLosersSession(t *testing.T) {
	defer goleak.VerifyNone(t)
	slow, fast := newSessionOut(), newSessionOut()
	defer fast.slot.Close()
	gate := make(chan struct{})
	defer close(gate)
	slow.slot = slot.New(slot.Config[*session]{Establish: func(ctx context.Context) (*session, error) {
		select {
		case <-gate:
			return &session{done: make(chan struct{})}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}})
	defer slow.slot.Close()
	via := coldSessionRig(slow, fast)
	p := &plane.Plane{}
	q := plane.Query{Network: netx.UDP}
	c, link, err := p.PreparePacket(context.Background(), via, &q, via.ColdCandidates(&q), netx.Flow{Network: netx.UDP}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	if c.Leaf.ID().Tag != "b" || !slow.ended.Load() {
		t.Fatalf("winner %s, the slow candidate ended: %v", c.Leaf.ID(), slow.ended.Load())
	}
	if st := slow.slot.State(); st.Phase != slot.Idle || st.Failures != 0 || st.Detached != 0 {
		t.Fatalf("the cancelled candidate's slot: %+v", st)
	}
}
