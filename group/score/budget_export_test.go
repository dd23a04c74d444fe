package score

import "fmt"

// CheckLedgers verifies every scope's books against its trial table: the
// inequality V + R ≤ B + ⌊E⌋, the credit cap, R equal to the unbegun
// trials, and each member's unanswered-trial count.
func (b *Budget) CheckLedgers() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.scopes {
		if w.spent+w.reserved > w.capacity() {
			return fmt.Errorf("V %d + R %d > B %d + ⌊E⌋ %d", w.spent, w.reserved, w.cold, w.e16/16)
		}
		if unspent := w.e16 - max(0, w.spent-int64(w.cold))*16; unspent > CreditCap*16 {
			return fmt.Errorf("unspent earned credit %d/16 above the cap", unspent)
		}
		unbegun := int64(0)
		open := map[uint64]map[[16]byte]int{}
		for tk, tr := range w.trials {
			if !tr.begun {
				unbegun++
			}
			if open[tr.inc] == nil {
				open[tr.inc] = map[[16]byte]int{}
			}
			open[tr.inc][tk.node]++
		}
		if unbegun != w.reserved {
			return fmt.Errorf("R %d but %d unbegun trials", w.reserved, unbegun)
		}
		for node, m := range w.members {
			if m.open != open[m.inc][node] {
				return fmt.Errorf("member open %d, table %d", m.open, open[m.inc][node])
			}
		}
	}
	return nil
}
