package plane

import (
	"context"
	"errors"
	"time"

	"switchyard/internal/coldudp"
	"switchyard/netx"
	"switchyard/outbound"
)

// Candidate is one leaf a cold UDP preparation may open, with the
// selection chain to it (the route target's tag first, the leaf's last).
type Candidate struct {
	Leaf  *Target
	Chain []string
}

// A ColdPreparer is a Chooser that, for a UDP flow it has no measurement to
// rank its members by, names several leaves to prepare at once: a URLTest
// group that is the route target (the spec's cold URLTest UDP
// preparation). Every other plan is one authoritative leaf.
type ColdPreparer interface {
	// ColdCandidates returns the leaves to prepare for q in the group's
	// ranking order, or nil when the group's pick is authoritative.
	ColdCandidates(q *Query) []Candidate
	// ColdEligible reports whether leaf is still an eligible candidate
	// for q: it is asked of each prepared success and again of the winner.
	ColdEligible(q *Query, leaf *Target) bool
}

// ColdCandidates are the leaves a cold preparation of q through t opens
// (see ColdPreparer); nil when t's pick is authoritative. Only the route
// target is asked: a group nested under another is never prepared so.
func (t *Target) ColdCandidates(q *Query) []Candidate {
	if c, ok := t.ch.(ColdPreparer); ok {
		return c.ColdCandidates(q)
	}
	return nil
}

// ColdEligible reports whether leaf is still an eligible cold candidate of
// q through t; false when t prepares nothing.
func (t *Target) ColdEligible(q *Query, leaf *Target) bool {
	c, ok := t.ch.(ColdPreparer)
	return ok && c.ColdEligible(q, leaf)
}

// PreparePacket opens the packet link of f on the first of cands (named
// by via's chooser for q) to succeed while still eligible, preparing them
// concurrently on the schedule of package coldudp under one absolute
// deadline, the plane's establishment deadline: each candidate's dial runs
// under an establishment of its own (its own admission permit) that ends at
// that same instant. failed hears each observed preparation error of a
// candidate, with the phase it failed in; a cancelled or drained candidate, a reload's retirement and a
// block are neutral. Every loser's link is closed and every attempt has
// returned when PreparePacket returns.
//
// Each candidate dials speculatively (netx.WithSpeculative): an outbound
// that shares one session between its flows (a QUIC connection, a tunnel)
// and has none up brings one up for that link alone, so that a loser
// publishes nothing: closing its link, or cancelling its dial, ends what
// it started. The winner, once its eligibility was checked again, is
// committed (netx.Commit) before PreparePacket returns it, ahead of its
// first send: its session becomes the outbound's shared one when the
// outbound has none by then.
func (p *Plane) PreparePacket(ctx context.Context, via *Target, q *Query, cands []Candidate, f netx.Flow, failed func(leaf *Target, phase netx.Phase, err error)) (Candidate, netx.PacketLink, error) {
	if _, ok := via.ch.(ColdPreparer); !ok || len(cands) == 0 {
		return Candidate{}, nil, coldudp.ErrNoCandidates
	}
	d := p.EstablishTimeout()
	until := time.Now().Add(d)
	// expired[i] is written by candidate i's attempt before its result is
	// handed over, and read after (Failed): the hand-over orders them.
	expired := make([]bool, len(cands))
	phases := make([]netx.Phase, len(cands))
	i, link, err := coldudp.Prepare(ctx, coldudp.Options[netx.PacketLink]{
		Candidates: len(cands),
		Start: func(actx context.Context, i int) (netx.PacketLink, error) {
			est, dctx, cancel := netx.Begin(netx.WithSpeculative(actx), p.Admission, time.Until(until))
			defer cancel()
			l, err := cands[i].Leaf.DialPacket(dctx, f)
			est.End()
			phases[i] = est.Phase()
			if err != nil && est.Expired(dctx) {
				expired[i] = true
			}
			return l, err
		},
		Eligible: func(i int) bool { return via.ColdEligible(q, cands[i].Leaf) },
		Discard:  func(_ int, l netx.PacketLink) { l.Close() },
		Failed: func(i int, err error) {
			if failed == nil || expired[i] || Reloaded(err) || errors.Is(err, outbound.ErrBlocked) {
				return
			}
			failed(cands[i].Leaf, phases[i], err)
		},
		Deadline: d,
	})
	if err != nil {
		return Candidate{}, nil, err
	}
	cctx, cancel := context.WithDeadline(ctx, until)
	netx.Commit(cctx, link)
	cancel()
	return cands[i], link, nil
}

var _ netx.Committer = (*guardedLink)(nil)

// Commit commits the outbound's link (netx.Committer): the winner of a
// cold preparation publishes the session its speculative dial brought up.
func (g *guardedLink) Commit(ctx context.Context) {
	if !g.drained.Load() {
		netx.Commit(ctx, g.link)
	}
}
