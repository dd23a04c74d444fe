package config

import (
	"math"

	"switchyard/internal/clip"
	"switchyard/spec"
)

// The [warmup] defaults: preconnect "auto", no UDP warm set, every
// Selector's TCP choice pinned warm.
const (
	defaultUDPWarmSet  = 0
	defaultSelectorPin = true
)

// warmup lowers [warmup].
func (l *lowerer) warmup(f *fileWarmup) spec.Warmup {
	w := spec.Warmup{Preconnect: spec.PreconnectAuto, UDPWarmSet: defaultUDPWarmSet, SelectorPin: defaultSelectorPin}
	switch v := f.Preconnect.(type) {
	case nil:
	case string:
		if v != "auto" {
			l.errorf("warmup.preconnect", `%q is neither "auto" nor an integer (0 turns the startup preconnect off)`, clip.Value(v))
		}
	case int64:
		if v < 0 || v > math.MaxInt32 {
			l.errorf("warmup.preconnect", "%d is out of range 0..%d", v, math.MaxInt32)
		} else {
			w.Preconnect = int(v)
		}
	default:
		l.errorf("warmup.preconnect", `must be "auto" or an integer (0 turns the startup preconnect off)`)
	}
	if n := f.UDPWarmSet; n != nil {
		if *n < 0 || *n > math.MaxInt32 {
			l.errorf("warmup.udp_warm_set", "%d is out of range 0..%d", *n, math.MaxInt32)
		} else {
			w.UDPWarmSet = int(*n)
		}
	}
	if f.SelectorPin != nil {
		w.SelectorPin = *f.SelectorPin
	}
	return w
}
