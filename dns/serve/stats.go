package serve

import "sync/atomic"

// Stats counts what a service did since it was made.
type Stats struct {
	Queries   uint64 // messages received: datagrams and TCP messages
	Answered  uint64 // replies produced, whatever their rcode
	Dropped   uint64 // messages given no reply: see Service.Stats
	FakeIP    uint64 // replies the FakeIP hook gave
	Failed    uint64 // Exchange errors and timeouts, answered SERVFAIL
	Truncated uint64 // UDP replies cut to the client's size, TC set
	// Rcodes counts replies by response code: Rcodes[dns.RcodeSuccess] is
	// NOERROR, [dns.RcodeServerFailure] SERVFAIL, up to BADCOOKIE (23).
	Rcodes [24]uint64
	// OtherRcodes counts replies whose code is above 23.
	OtherRcodes uint64
}

type counters struct {
	queries, answered, dropped, fakeIP, failed, truncated, otherRcodes atomic.Uint64
	rcodes                                                             [24]atomic.Uint64
}

// count counts one reply with rcode.
func (s *Service) count(rcode int) {
	s.stats.answered.Add(1)
	if rcode >= 0 && rcode < len(s.stats.rcodes) {
		s.stats.rcodes[rcode].Add(1)
		return
	}
	s.stats.otherRcodes.Add(1)
}

// Stats returns the service's counters. Dropped counts messages too short
// for a header, responses, datagrams over a link's MaxInFlight, and
// answers whose link closed before they were read.
func (s *Service) Stats() Stats {
	st := Stats{
		Queries:     s.stats.queries.Load(),
		Answered:    s.stats.answered.Load(),
		Dropped:     s.stats.dropped.Load(),
		FakeIP:      s.stats.fakeIP.Load(),
		Failed:      s.stats.failed.Load(),
		Truncated:   s.stats.truncated.Load(),
		OtherRcodes: s.stats.otherRcodes.Load(),
	}
	for i := range st.Rcodes {
		st.Rcodes[i] = s.stats.rcodes[i].Load()
	}
	return st
}
