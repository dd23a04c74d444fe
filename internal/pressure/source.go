package pressure

import (
	"sync"
	"time"
)

// Sampler is a runtime's carriers as its heartbeat reads them: Sample
// returns the active intervals that ended at at.
type Sampler interface {
	Sample(at time.Time) []Sample
}

// CounterSource is a carrier that reads its own counters: a runtime's
// shared QUIC connection. ok is false while there is none.
type CounterSource interface {
	CarrierCounters() (c Counters, ok bool)
}

// Source samples one CounterSource with a Window.
type Source struct {
	src CounterSource
	mu  sync.Mutex // guards win: one Sample at a time
	win Window
}

var (
	_ Sampler = (*Source)(nil)
	_ Sampler = (*TCPCarriers)(nil)
)

// NewSource returns a Sampler over src.
func NewSource(src CounterSource) *Source { return &Source{src: src} }

// Sample reads the source at at; with no carrier up, the window starts
// over with the next one.
func (s *Source) Sample(at time.Time) []Sample {
	c, ok := s.src.CarrierCounters()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.win.Reset()
		return nil
	}
	if smp, v := s.win.Next(at, c); v == Active {
		return []Sample{smp}
	}
	return nil
}
