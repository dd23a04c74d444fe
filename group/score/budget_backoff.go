package score

import (
	"math"

	"switchyard/health"
	"switchyard/netx"
)

// The trial backoff after real failures (see budget.go's "values chosen"):
// the member's, after a node-scoped failure, in memberState; the (member,
// target) ones, after a target-scoped failure, in the wallet's bounded
// tback table.

// memberTarget names one (member, business target) backoff of a scope.
type memberTarget struct {
	node health.NodeID
	tgt  target
}

// targetBackoff is one (member, target) backoff: the consecutive
// target-scoped real failures of the member on the target and when the
// backoff ends, at the member's incarnation.
type targetBackoff struct {
	inc    uint64
	streak uint8
	until  int64
}

// backoffFor is the backoff after streak consecutive real failures:
// BackoffBase doubling per failure, capped at BackoffMax.
func backoffFor(streak uint8) int64 {
	if streak > 7 {
		return int64(BackoffMax)
	}
	return int64(min(BackoffBase<<(streak-1), BackoffMax))
}

// backoff extends node's backoff in the scope after a node-scoped real
// failure.
func (w *wallet) backoff(node health.NodeID, inc uint64, now int64) {
	m := w.member(node, inc)
	if m.streak < math.MaxUint8 {
		m.streak++
	}
	m.until = now + backoffFor(m.streak)
	w.members[node] = m
}

// targetBackoff extends node's backoff on tgt alone after a target-scoped
// real failure; a targetless one (none is target-scoped) backs off the
// member.
func (w *wallet) targetBackoff(node health.NodeID, tgt target, inc uint64, now int64) {
	if tgt.text == "" {
		w.backoff(node, inc, now)
		return
	}
	mt := memberTarget{node, tgt}
	tb, ok := w.tback[mt]
	if !ok || tb.inc != inc {
		tb = targetBackoff{inc: inc}
		if w.tback == nil {
			w.tback = make(map[memberTarget]targetBackoff)
		}
		if len(w.tback) >= TargetBackoffs {
			w.evictTargetBackoff(now)
		}
	}
	if tb.streak < math.MaxUint8 {
		tb.streak++
	}
	tb.until = now + backoffFor(tb.streak)
	w.tback[mt] = tb
}

// evictTargetBackoff drops one entry of a full table: one whose backoff
// ended, else the one ending soonest.
func (w *wallet) evictTargetBackoff(now int64) {
	var victim memberTarget
	soonest := int64(math.MaxInt64)
	for mt, tb := range w.tback {
		if tb.until <= now {
			delete(w.tback, mt)
			return
		}
		if tb.until < soonest {
			victim, soonest = mt, tb.until
		}
	}
	delete(w.tback, victim)
}

// targetBackedOff reports whether node's trials on tgt are backed off.
func (w *wallet) targetBackedOff(node health.NodeID, tgt target, inc uint64, now int64) bool {
	if tgt.text == "" || len(w.tback) == 0 {
		return false
	}
	tb, ok := w.tback[memberTarget{node, tgt}]
	return ok && tb.inc == inc && now < tb.until
}

// recovered ends node's backoff in the scope and its backoff on tgt.
func (w *wallet) recovered(node health.NodeID, tgt target, inc uint64) {
	if m, ok := w.members[node]; ok && m.inc == inc {
		m.streak, m.until = 0, 0
		w.members[node] = m
	}
	if tgt.text != "" {
		delete(w.tback, memberTarget{node, tgt})
	}
}

// Failed records a node-scoped real business failure of node in scope k
// outside a trial: it extends the member's backoff for every trial in
// the scope.
func (b *Budget) Failed(k BudgetKey, node health.NodeID) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	inc, ok := b.members[member{k.Group, node}]
	if !ok {
		return
	}
	if w := b.wallet(k); w != nil {
		w.backoff(node, inc, now)
	}
}

// TargetFailed records a target-scoped real business failure of node on
// addr in scope k outside a trial: it extends only the member's backoff
// on that target (the zero target: the member's, as Failed).
func (b *Budget) TargetFailed(k BudgetKey, node health.NodeID, addr netx.Addr) {
	tgt, _, err := normalizeTarget(addr)
	if err != nil {
		return
	}
	b.targetFailed(k, node, tgt)
}

func (b *Budget) targetFailed(k BudgetKey, node health.NodeID, tgt target) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	inc, ok := b.members[member{k.Group, node}]
	if !ok {
		return
	}
	if w := b.wallet(k); w != nil {
		w.targetBackoff(node, tgt, inc, now)
	}
}

// Recovered ends node's backoff in scope k, and its backoff on addr (the
// zero Addr: none): genuine scoped RX on addr opened its recovery.
func (b *Budget) Recovered(k BudgetKey, node health.NodeID, addr netx.Addr) {
	tgt, _, err := normalizeTarget(addr)
	if err != nil {
		tgt = target{}
	}
	b.recovered(k, node, tgt)
}

func (b *Budget) recovered(k BudgetKey, node health.NodeID, tgt target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[k]
	if w == nil {
		return
	}
	if inc, ok := b.members[member{k.Group, node}]; ok {
		w.recovered(node, tgt, inc)
	}
}
