package score_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func qualOn(n, tgt int) score.Trial {
	return score.Trial{Node: node(n), Question: score.Qualification, Target: target(tgt)}
}

func recoveryOn(n, tgt int) score.Trial {
	return score.Trial{Node: node(n), Question: score.Recovery, Target: target(tgt)}
}

// release reserves tr and gives it back: the ledger would fund it now.
func (h *bharness) admits(k score.BudgetKey, tr score.Trial) {
	h.t.Helper()
	h.b.Release(h.reserve(k, false, tr))
}

// A trial failing with a target-scoped kind backs the member off only on
// that target: its trials on other targets, whatever their question, still
// dispatch; the same target's back off 5 minutes doubling to 6 hours, and
// the failure still counts as a failed trial outcome.
func TestTargetScopedTrialFailureBacksOffOnlyThatTarget(t *testing.T) {
	h := newBudget(t, 2)
	h.earn(kV4, 16*8)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 360, 360}
	for i, m := range want {
		h.earn(kV4, 16)
		h.trial(kV4, false, recoveryOn(1, 1), score.TrialTargetFailed)
		d := m * time.Minute
		h.clk.Advance(d - time.Second)
		for _, tr := range []score.Trial{recoveryOn(1, 1), qualOn(1, 1), pair(1, 1)} {
			h.refused(kV4, false, tr, score.ErrBackedOff)
			if err := h.b.Wait(kV4, false, tr); !errors.Is(err, score.ErrBackedOff) {
				t.Fatalf("failure %d: Wait %v, want the backoff", i+1, err)
			}
		}
		// The member's other targets, and its targetless qualification.
		h.admits(kV4, qualOn(1, 2))
		h.admits(kV4, pair(1, 2))
		h.admits(kV4, recoveryOn(1, 3))
		h.admits(kV4, qual(1))
		h.clk.Advance(time.Second)
		if r, err := h.b.Reserve(kV4, false, recoveryOn(1, 1)); err != nil {
			t.Fatalf("failure %d: still refused after %v: %v", i+1, d, err)
		} else {
			h.b.Release(r)
		}
	}
	if l := h.ledger(kV4); l.Counts.Failed != int64(len(want)) || l.Failures <= 0 {
		t.Fatalf("target-scoped failures are failed trial outcomes: %+v", l)
	}
	// A walk passes over the backed-off target's member to the next and
	// counts it once; on another target the member is admitted.
	h.trial(kV4, false, recoveryOn(1, 1), score.TrialTargetFailed)
	sel := score.Selection{Completions: 5}
	cs := []score.Challenger{
		{Node: node(1), Question: score.Recovery, Target: target(1)},
		{Node: node(2), Question: score.Recovery, Target: target(1), Trained: true},
	}
	res := h.b.Walk(kV4, sel, cs)
	if res.Admitted != 1 || cs[1].Node != node(2) || res.BackedOff != 1 || !errors.Is(res.Wait, score.ErrBackedOff) {
		t.Fatalf("walk %+v", res)
	}
	h.b.Release(res.Reservation)
	cs = []score.Challenger{{Node: node(1), Question: score.Qualification, Target: target(4)}}
	if res = h.b.Walk(kV4, sel, cs); res.Admitted != 0 || res.BackedOff != 0 {
		t.Fatalf("another target's walk %+v", res)
	}
	h.b.Release(res.Reservation)
	// A success on another target ends nothing on this one; on this one
	// it ends it, and the next failure backs off 5 minutes again.
	h.trial(kV4, false, qualOn(1, 2), score.TrialSucceeded)
	h.refused(kV4, false, recoveryOn(1, 1), score.ErrBackedOff)
	h.clk.Advance(6 * time.Hour)
	h.trial(kV4, false, recoveryOn(1, 1), score.TrialSucceeded)
	h.trial(kV4, false, recoveryOn(1, 1), score.TrialTargetFailed)
	h.clk.Advance(5 * time.Minute)
	h.admits(kV4, recoveryOn(1, 1))
}

// A target-scoped failure outside a trial backs off the member on that
// target alone; genuine scoped RX on the target (Recovered) ends it, RX
// on another target does not. A node-scoped failure still backs the
// member off for every target.
func TestTargetScopedBusinessFailureAndRecovery(t *testing.T) {
	h := newBudget(t, 2)
	h.earn(kV4, 16*8)
	h.b.TargetFailed(kV4, node(1), target(1))
	h.refused(kV4, false, qualOn(1, 1), score.ErrBackedOff)
	h.admits(kV4, qualOn(1, 2))
	h.admits(kV4, qualOn(2, 1))
	h.b.Recovered(kV4, node(1), target(2))
	h.refused(kV4, false, qualOn(1, 1), score.ErrBackedOff)
	h.b.Recovered(kV4, node(1), target(1))
	h.admits(kV4, qualOn(1, 1))
	// Consecutive business failures on the target double its backoff.
	h.b.TargetFailed(kV4, node(1), target(1))
	h.b.TargetFailed(kV4, node(1), target(1))
	h.clk.Advance(10*time.Minute - time.Second)
	h.refused(kV4, false, qualOn(1, 1), score.ErrBackedOff)
	h.clk.Advance(time.Second)
	h.admits(kV4, qualOn(1, 1))
	// Node-scoped: every target.
	h.b.Failed(kV4, node(1))
	h.refused(kV4, false, qualOn(1, 2), score.ErrBackedOff)
	h.refused(kV4, false, qual(1), score.ErrBackedOff)
	h.admits(kV4, qualOn(2, 2))
	// The targetless TargetFailed is the member's.
	h.b.TargetFailed(kV4, node(2), netx.Addr{})
	h.refused(kV4, false, qualOn(2, 3), score.ErrBackedOff)
}

// The (member, target) table holds TargetBackoffs entries per scope: a
// full table drops an ended backoff first, else the one ending soonest.
func TestTargetBackoffTableBound(t *testing.T) {
	h := newBudget(t, 2)
	for i := 1; i <= score.TargetBackoffs; i++ {
		h.b.TargetFailed(kV4, node(1), target(i))
		h.clk.Advance(time.Second)
	}
	h.earn(kV4, 16*8)
	for i := 1; i <= score.TargetBackoffs; i++ {
		h.refused(kV4, false, qualOn(1, i), score.ErrBackedOff)
	}
	// Full: the soonest-ending (target 1's) goes.
	h.b.TargetFailed(kV4, node(1), target(1000))
	h.refused(kV4, false, qualOn(1, 1000), score.ErrBackedOff)
	h.admits(kV4, qualOn(1, 1))
	h.refused(kV4, false, qualOn(1, 2), score.ErrBackedOff)
	// Target 2's second failure outlives the rest; once the first-round
	// backoffs have ended, new entries replace ended ones, not target 2.
	h.b.TargetFailed(kV4, node(1), target(2))
	h.clk.Advance(5 * time.Minute)
	for i := 2000; i < 2000+score.TargetBackoffs-1; i++ { // 63 ended entries make room
		h.b.TargetFailed(kV4, node(1), target(i))
	}
	h.refused(kV4, false, qualOn(1, 2), score.ErrBackedOff)
	h.refused(kV4, false, qualOn(1, 2000), score.ErrBackedOff)
}

// Reload keeps a retained member's target backoffs and forgets those of a
// member that left or changed incarnation.
func TestTargetBackoffAcrossReload(t *testing.T) {
	h := newBudget(t, 3)
	h.earn(kV4, 16*8)
	for n := 1; n <= 3; n++ {
		h.b.TargetFailed(kV4, node(n), target(1))
	}
	ms := members(3)
	ms[1].Incarnation = 2 // node 2 changed
	h.b.Reload(ms[:2])    // node 3 left
	h.refused(kV4, false, qualOn(1, 1), score.ErrBackedOff)
	h.admits(kV4, qualOn(2, 1))
	h.b.Reload(members(3)) // node 3 back (node 2 at incarnation 1 again)
	h.admits(kV4, qualOn(3, 1))
	h.refused(kV4, false, qualOn(1, 1), score.ErrBackedOff)
}

// Through the Engine: a trial of a member failing with a target-path
// failure backs it off on that target only, so the walk still sends it
// trials on the other targets while counting it backed off on this one.
func TestEngineTargetScopedTrialFailureKeepsOtherTargetsTrials(t *testing.T) {
	h := newEng(t, 2)
	h.e.Probe(netx.TCP, node(2), h.now(), time.Millisecond, true, 10*time.Second) // node 2 is the selection
	h.e.Probe(netx.TCP, node(1), h.now(), 5*time.Millisecond, true, 10*time.Second)
	// run ranks one flow to tgt: a trial of node 1 fails on failTarget, all
	// else is useful. It reports whether the flow was a trial of node 1.
	run := func(tgt, failTarget netx.Addr) bool {
		r := h.req(tgt)
		d := h.e.Rank(h.now(), r)
		f, err := d.Attempt.Begin(h.now())
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		trial1 := d.Attempt.Trial() && r.Cands[d.Index].Node == node(1)
		if trial1 && tgt == failTarget {
			f.Setup(h.now())
			f.Progress(h.now(), 80, 0)
			f.Fail(h.now().Add(time.Millisecond), score.Failure{Kind: score.TargetPath})
		} else {
			runUseful(f, h.now(), time.Millisecond)
		}
		h.clk.Advance(10 * time.Millisecond)
		return trial1
	}
	x, y := target(1), target(2)
	tried := false
	for range 64 {
		if run(x, x) {
			tried = true
			break
		}
	}
	if !tried {
		t.Fatal("node 1 was never tried on the first target")
	}
	if n := h.stats(netx.TCP).Budget.Trials.Failed; n != 1 {
		t.Fatalf("trial failures %d, want 1", n)
	}
	before := h.stats(netx.TCP).ExploreBackedOff
	tried = false
	for range 64 {
		if run(y, x) {
			tried = true
			break
		}
	}
	if !tried {
		t.Fatal("node 1 got no trial on another target after a target-path failure on the first")
	}
	for range 32 {
		if run(x, netx.Addr{}) {
			t.Fatal("node 1 was tried again on the failed target within its backoff")
		}
	}
	if h.stats(netx.TCP).ExploreBackedOff <= before {
		t.Fatal("the walk did not count node 1 backed off on the failed target")
	}
}
