package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// Every authorized multi-candidate rank counts its ordinary selection's
// verification as Explain reads it — provisional until the selection is
// qualified in the rank's scope, observed usable once four reporters
// proved it — and the validations it dispatched; peeks and retries count
// nothing.
func TestVerificationCounters(t *testing.T) {
	h := newEng(t, 2)
	tgt := target(1)
	var trials int64
	explain := func() score.Explanation {
		ex, ok := h.e.Explain(h.now(), score.ExplainQuery{Group: grp, Network: netx.TCP, Family: netx.V4, Target: tgt, Cands: h.req(tgt).Cands})
		if !ok {
			t.Fatal("no explanation")
		}
		return ex
	}
	d := h.useful(h.req(tgt))
	if d.Attempt.Trial() {
		trials++
	}
	v := h.stats(netx.TCP).Verification
	if v.Provisional != 1 || v.ObservedUsable != 0 {
		t.Fatalf("a cold first rank counted %+v, want one provisional selection", v)
	}
	for range 16 {
		h.clk.Advance(100 * time.Millisecond)
		if d := h.useful(h.req(tgt)); d.Attempt.Trial() {
			trials++
		}
	}
	ex := explain()
	if ex.Provisional || !ex.ObservedUsable {
		t.Fatalf("after 17 useful flows the selection reads provisional=%v usable=%v", ex.Provisional, ex.ObservedUsable)
	}
	before := h.stats(netx.TCP).Verification
	if before.Validation != trials {
		t.Fatalf("%d validations counted for %d trials dispatched", before.Validation, trials)
	}
	if before.Provisional == 0 || before.Provisional >= 17 {
		t.Fatalf("%d of 17 ranks counted provisional", before.Provisional)
	}
	h.clk.Advance(100 * time.Millisecond)
	d = h.useful(h.req(tgt))
	after := h.stats(netx.TCP).Verification
	if after.Provisional != before.Provisional || after.ObservedUsable != before.ObservedUsable+1 {
		t.Fatalf("a rank of a qualified, usable selection moved %+v to %+v", before, after)
	}
	// Neutral ranks count nothing.
	p := h.req(tgt)
	p.Peek = true
	h.e.Rank(h.now(), p)
	r := h.req(tgt)
	r.Retry, r.Exclude = true, node(1)
	if d := h.e.Rank(h.now(), r); d.Attempt != nil {
		d.Attempt.Release(h.now())
	}
	if got := h.stats(netx.TCP).Verification; got.Provisional != after.Provisional || got.ObservedUsable != after.ObservedUsable {
		t.Fatalf("a peek and a retry moved the verification counters: %+v → %+v", after, got)
	}
}
