package track

import (
	"cmp"
	"slices"
	"sync"
)

// byID copies the values of live under mu, then returns snap of each
// (outside the lock) ordered by id: how the flow, session and dial tables
// hand out their snapshots.
func byID[V, S any](mu *sync.Mutex, live map[uint64]V, snap func(V) S, id func(S) uint64) []S {
	mu.Lock()
	vs := make([]V, 0, len(live))
	for _, v := range live {
		vs = append(vs, v)
	}
	mu.Unlock()
	out := make([]S, len(vs))
	for i, v := range vs {
		out[i] = snap(v)
	}
	slices.SortFunc(out, func(a, b S) int { return cmp.Compare(id(a), id(b)) })
	return out
}
