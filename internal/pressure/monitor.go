package pressure

import (
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// The detection rules of the spec.
const (
	TrainingSamples  = 4                     // active RTT samples that make the baseline
	PressureStreak   = 3                     // consecutive pressured intervals that fire an episode
	RearmStreak      = 2                     // consecutive qualified normal intervals that rearm it
	RTTFactorNum     = 3                     // RTT pressure: at least 3/2 of the baseline
	RTTFactorDen     = 2                     //
	RTTFloor         = 20 * time.Millisecond // and at least this much above it
	MinTransmissions = 32                    // send loss: transmissions in the interval
	MinLost          = 3                     // retransmitted/lost packets in the interval
	LossRatioDen     = 20                    // lost/transmissions at least 1/20 (5 %)
	PublishInterval  = 30 * time.Second      // at most one publication per slot
	HintLifetime     = 60 * time.Second      // a hint expires this long after publication
)

// Kind is the pressure an episode saw: a set of flags, since one
// publication answers every kind due in its interval.
type Kind uint8

const (
	KindRTT  Kind = 1 << iota // RTT pressure
	KindLoss                  // send-loss pressure
)

func (k Kind) String() string {
	switch k {
	case KindRTT:
		return "rtt"
	case KindLoss:
		return "loss"
	case KindRTT | KindLoss:
		return "rtt+loss"
	}
	return "none"
}

// Hint is one published episode: when, on which actual socket family, and
// what kind. Seq grows with every publication of the Monitor, so a reader
// tells a new episode from one it has seen.
type Hint struct {
	At     time.Time
	Family netx.Family
	Kind   Kind
	Seq    uint64
}

// Fresh reports whether the hint is still valid at at: less than
// HintLifetime after its publication.
func (h Hint) Fresh(at time.Time) bool { return at.Sub(h.At) < HintLifetime }

// Monitor detects pressure episodes of one runtime's carriers, with one
// slot per actual socket family. Observe is called by the runtime owner's
// heartbeat; Hint and Latest by any reader, without a lock.
type Monitor struct {
	mu      sync.Mutex // guards slots, fenceAt, seq
	slots   [2]slot    // indexed by netx.Family
	fenceAt time.Time  // samples starting before it are the previous configuration's
	seq     uint64

	latest atomic.Pointer[Hint] // the last publication; nil: none since the fence
}

// slot is one family's detector.
type slot struct {
	training []time.Duration // the first active RTT samples, up to TrainingSamples
	baseline time.Duration   // 0 until trained
	rtt      signal
	loss     signal
	lastPub  time.Time // the slot's last publication; zero: never
}

// signal is one kind's episode state.
type signal struct {
	pressured int  // consecutive pressured intervals
	normal    int  // consecutive qualified normal intervals
	disarmed  bool // an episode fired; RearmStreak normal intervals rearm it
}

// judge advances the signal with one qualified interval and reports
// whether it asks for a publication.
func (s *signal) judge(pressured bool) bool {
	if !pressured {
		s.pressured = 0
		s.normal++
		if s.disarmed && s.normal >= RearmStreak {
			s.disarmed, s.normal = false, 0
		}
		return false
	}
	s.normal = 0
	if s.disarmed {
		return false
	}
	s.pressured++
	return s.pressured >= PressureStreak
}

// fired records the publication of the signal's episode.
func (s *signal) fired() { s.pressured, s.normal, s.disarmed = 0, 0, true }

// Result is what one Observe did.
type Result struct {
	// Published is set when an episode was published; Hint is it.
	Published bool
	Hint      Hint
	// Held is set when an episode was due but its slot had published
	// less than PublishInterval before: it stays due, and publishes on
	// the first pressured interval after the interval has passed.
	Held bool
}

// Observe takes the active samples of one heartbeat pass, made at at.
// Samples of the same family are one interval of that family: their
// counts add up and their RTT is the payload-weighted mean. Samples that
// started before the last Fence are ignored.
func (m *Monitor) Observe(at time.Time, samples ...Sample) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	var merged [2]Sample
	var n [2]int
	for _, s := range samples {
		if s.Start.Before(m.fenceAt) {
			continue
		}
		f := s.Family & 1
		merged[f] = mergeSample(merged[f], n[f], s)
		n[f]++
	}
	var res Result
	for f := range merged {
		if n[f] == 0 {
			continue
		}
		if h, held, ok := m.observe(at, netx.Family(f), merged[f]); ok {
			res.Published, res.Hint = true, h
		} else if held {
			res.Held = true
		}
	}
	return res
}

// mergeSample adds s to acc, the merge of n samples.
func mergeSample(acc Sample, n int, s Sample) Sample {
	if n == 0 {
		return s
	}
	w0, w1 := acc.Payload, s.Payload
	if w0+w1 > 0 {
		acc.RTT = time.Duration((float64(acc.RTT)*float64(w0) + float64(s.RTT)*float64(w1)) / float64(w0+w1))
	} else {
		acc.RTT = max(acc.RTT, s.RTT)
	}
	if s.Start.Before(acc.Start) {
		acc.Start = s.Start
	}
	if s.End.After(acc.End) {
		acc.End = s.End
	}
	acc.Payload += s.Payload
	acc.Sent += s.Sent
	acc.Datagrams += s.Datagrams
	acc.Transmissions += s.Transmissions
	acc.Lost += s.Lost
	acc.LostBytes += s.LostBytes
	return acc
}

// observe judges one family's interval; m.mu is held.
func (m *Monitor) observe(at time.Time, f netx.Family, s Sample) (h Hint, held, published bool) {
	sl := &m.slots[f]
	var due Kind
	if sl.baseline == 0 {
		sl.training = append(sl.training, s.RTT)
		if len(sl.training) == TrainingSamples {
			sl.baseline = median(sl.training)
			sl.training = nil
		}
	} else if sl.rtt.judge(rttPressured(sl.baseline, s.RTT)) {
		due |= KindRTT
	}
	if lossQualified(s) && sl.loss.judge(lossPressured(s)) {
		due |= KindLoss
	}
	if due == 0 {
		return Hint{}, false, false
	}
	if !sl.lastPub.IsZero() && at.Sub(sl.lastPub) < PublishInterval {
		return Hint{}, true, false
	}
	m.seq++
	h = Hint{At: at, Family: f, Kind: due, Seq: m.seq}
	sl.lastPub = at
	// One publication answers every kind due in this interval.
	if due&KindRTT != 0 {
		sl.rtt.fired()
	}
	if due&KindLoss != 0 {
		sl.loss.fired()
	}
	m.latest.Store(&h)
	return h, false, true
}

// rttPressured: at least 1.5 times the baseline and RTTFloor above it.
func rttPressured(baseline, rtt time.Duration) bool {
	return RTTFactorDen*rtt >= RTTFactorNum*baseline && rtt >= baseline+RTTFloor
}

// lossQualified: meaningful outgoing payload and enough transmissions to
// judge send loss at all.
func lossQualified(s Sample) bool {
	return (s.Sent >= MinPayloadBytes || s.Datagrams >= MinDatagrams) && s.Transmissions >= MinTransmissions
}

// lossPressured: three lost packets, positive lost bytes, and a 5 % ratio.
func lossPressured(s Sample) bool {
	return s.Lost >= MinLost && s.LostBytes > 0 && LossRatioDen*s.Lost >= s.Transmissions
}

// median of the training samples: the mean of the middle two of four.
func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Hint reports whether a hint is active at at: one was published less
// than HintLifetime before, and no Fence came since. It reads one atomic
// and changes nothing.
func (m *Monitor) Hint(at time.Time) bool {
	_, ok := m.Latest(at)
	return ok
}

// Latest is the last published hint while it is fresh at at.
func (m *Monitor) Latest(at time.Time) (Hint, bool) {
	h := m.latest.Load()
	if h == nil || !h.Fresh(at) {
		return Hint{}, false
	}
	return *h, true
}

// Fence ends every prior episode, at a reload: the published hint is
// withdrawn, the baselines retrain, streaks and disarmed episodes start
// over, and samples whose interval began before at are ignored. The
// publication rate limit keeps counting from the last publication.
func (m *Monitor) Fence(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.slots {
		m.slots[i] = slot{lastPub: m.slots[i].lastPub}
	}
	m.fenceAt = at
	m.latest.Store(nil)
}

// State is a slot's detector state, for the owner's diagnostics and tests.
type State struct {
	Trained       bool
	Baseline      time.Duration
	RTTArmed      bool
	LossArmed     bool
	RTTPressured  int // consecutive pressured RTT intervals
	LossPressured int // consecutive pressured send-loss intervals
}

// State reads family f's detector state.
func (m *Monitor) State(f netx.Family) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	sl := &m.slots[f&1]
	return State{
		Trained:       sl.baseline > 0,
		Baseline:      sl.baseline,
		RTTArmed:      !sl.rtt.disarmed,
		LossArmed:     !sl.loss.disarmed,
		RTTPressured:  sl.rtt.pressured,
		LossPressured: sl.loss.pressured,
	}
}
