package proxyconn

import (
	"switchyard/outbound"
	"switchyard/transport"
)

// Warmth is a transport's reading in the outbound's terms.
func Warmth(w transport.Warmth) outbound.Warmth {
	k := outbound.WarmNone
	switch w.Kind {
	case transport.WarmPool:
		k = outbound.WarmPool
	case transport.WarmSession:
		k = outbound.WarmSession
	}
	return outbound.Warmth{Kind: k, Pooled: w.Pooled, Up: w.Up, IdleBound: w.IdleBound, Learning: w.Learning}
}
