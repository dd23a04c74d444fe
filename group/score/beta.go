package score

import "math"

const (
	// SetupFailureWeight is how many terminal failures one failure before
	// setup counts as in the Beta bounds (see the package documentation).
	SetupFailureWeight = 2.0
	// BoundZ is the normal quantile of the bounds: 1.96, a two-sided 95 %
	// interval.
	BoundZ = 1.96
	// BlendThreshold is the decayed outcome count (successes plus
	// failures) at which a more specific layer stands alone.
	BlendThreshold = 8.0
)

// counts is one layer's decayed outcome evidence, failures already
// weighted.
type counts struct {
	s, f float64
}

func (c counts) n() float64 { return c.s + c.f }

// blend moves from parent toward the more specific layer spec in
// proportion to spec's own decayed outcomes, reaching spec alone at
// BlendThreshold. The result interpolates; it never adds the layers'
// overlapping counts.
func blend(parent, spec counts) counts {
	w := min(1, spec.n()/BlendThreshold)
	return counts{s: parent.s + w*(spec.s-parent.s), f: parent.f + w*(spec.f-parent.f)}
}

// bounds returns the Beta(1+s, 1+f) posterior mean of success and its
// lower and upper bounds: the mean ∓ BoundZ standard deviations, clipped
// to [0, 1].
func bounds(c counts) (mean, lo, hi float64) {
	a, b := 1+c.s, 1+c.f
	n := a + b
	mean = a / n
	sd := math.Sqrt(a * b / (n * n * (n + 1)))
	return mean, max(0, mean-BoundZ*sd), min(1, mean+BoundZ*sd)
}
