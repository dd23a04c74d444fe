package netx

// Paced is an Observed wrapper whose bytes are paced. Its own Read and Write
// pace themselves; a relay that moves bytes beneath it (splicing) moves at
// most Step bytes at a time in a direction (reads when read is set; 0 means
// no bound) and, once it has reported them with ObserveRead or ObserveWrite,
// calls Pace, which returns when the rate has paid for them, or with an
// error as soon as the flow has ended.
type Paced interface {
	Observed
	Step(read bool) int64
	Pace(read bool, n int64) error
}
