package pressure

import (
	"testing"
	"time"

	"switchyard/netx"
)

const step = 5 * time.Second // the heartbeat's interval

// clock hands out the end of each next interval.
type clock struct{ at time.Time }

func (c *clock) next() (start, end time.Time) {
	start = c.at
	c.at = c.at.Add(step)
	return start, c.at
}

// rtt is an active interval with RTT r and no loss.
func (c *clock) rtt(r time.Duration) Sample {
	s, e := c.next()
	return Sample{Start: s, End: e, Family: netx.V4, RTT: r, Payload: 64 << 10, Sent: 64 << 10, Transmissions: 50}
}

// loss is an active interval at RTT r that sent tx packets and lost lost
// of them, lostBytes bytes.
func (c *clock) loss(r time.Duration, tx, lost, lostBytes uint64) Sample {
	s := c.rtt(r)
	s.Transmissions, s.Lost, s.LostBytes = tx, lost, lostBytes
	return s
}

// feed observes each sample at its end and returns the intervals (1-based)
// at which an episode was published.
func feed(m *Monitor, samples ...Sample) []int {
	var fired []int
	for i, s := range samples {
		if m.Observe(s.End, s).Published {
			fired = append(fired, i+1)
		}
	}
	return fired
}

func repeat(n int, f func() Sample) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

const ms = time.Millisecond

// trained returns a monitor whose V4 baseline is 40 ms, and its clock.
func trained(t *testing.T) (*Monitor, *clock) {
	t.Helper()
	m, c := &Monitor{}, &clock{at: t0}
	if f := feed(m, repeat(TrainingSamples, func() Sample { return c.rtt(40 * ms) })...); f != nil {
		t.Fatalf("fired while training: %v", f)
	}
	if st := m.State(netx.V4); !st.Trained || st.Baseline != 40*ms {
		t.Fatalf("after training: %+v", st)
	}
	return m, c
}

// RTT trains on four active samples: before the fourth there is no
// baseline, so no interval is pressure however slow.
func TestRTTTrainsOnFourSamples(t *testing.T) {
	m, c := &Monitor{}, &clock{at: t0}
	samples := []Sample{c.rtt(40 * ms), c.rtt(40 * ms), c.rtt(40 * ms)}
	feed(m, samples...)
	if m.State(netx.V4).Trained {
		t.Fatal("trained after three samples")
	}
	// The fourth training sample is slow: the baseline is the median of
	// the four (40 ms), and the next three slow intervals fire.
	samples = repeat(4, func() Sample { return c.rtt(200 * ms) })
	if f := feed(m, samples...); len(f) != 1 || f[0] != 4 {
		t.Fatalf("published at intervals %v after training, want [4]", f)
	}
	if st := m.State(netx.V4); st.Baseline != 40*ms {
		t.Fatalf("baseline %v, want the median 40ms", st.Baseline)
	}
}

// Three consecutive pressured intervals fire; a normal one in between
// starts the count over.
func TestRTTNeedsThreeConsecutiveIntervals(t *testing.T) {
	m, c := trained(t)
	hi, lo := func() Sample { return c.rtt(100 * ms) }, func() Sample { return c.rtt(40 * ms) }
	if f := feed(m, hi(), hi(), lo(), hi(), hi()); f != nil {
		t.Fatalf("fired at %v with at most two consecutive", f)
	}
	if f := feed(m, hi()); len(f) != 1 {
		t.Fatal("three consecutive did not fire")
	}
	h, ok := m.Latest(c.at)
	if !ok || h.Kind != KindRTT || h.Family != netx.V4 || !h.At.Equal(c.at) || h.Seq != 1 {
		t.Fatalf("hint %+v %v", h, ok)
	}
}

// The 20 ms floor: on a 10 ms baseline, 29.9 ms is three times the
// baseline but less than 20 ms above it.
func TestRTTFloor(t *testing.T) {
	m, c := &Monitor{}, &clock{at: t0}
	feed(m, repeat(4, func() Sample { return c.rtt(10 * ms) })...)
	if f := feed(m, repeat(6, func() Sample { return c.rtt(30*ms - 100*time.Microsecond) })...); f != nil {
		t.Fatalf("fired below the floor at %v", f)
	}
	if f := feed(m, repeat(3, func() Sample { return c.rtt(30 * ms) })...); len(f) != 1 {
		t.Fatal("baseline + 20 ms did not fire")
	}
}

// The 1.5× factor: on a 100 ms baseline, 149 ms is more than 20 ms above
// but less than 1.5 times it.
func TestRTTFactor(t *testing.T) {
	m, c := &Monitor{}, &clock{at: t0}
	feed(m, repeat(4, func() Sample { return c.rtt(100 * ms) })...)
	if f := feed(m, repeat(6, func() Sample { return c.rtt(149 * ms) })...); f != nil {
		t.Fatalf("fired below 1.5x at %v", f)
	}
	if f := feed(m, repeat(3, func() Sample { return c.rtt(150 * ms) })...); len(f) != 1 {
		t.Fatal("1.5x the baseline did not fire")
	}
}

func TestSendLossRules(t *testing.T) {
	for _, tc := range []struct {
		name               string
		sent, tx, lost, lb uint64
		datagrams          uint64
		fires              bool
	}{
		{"32 transmissions, 3 lost (9 %)", 64 << 10, 32, 3, 3000, 0, true},
		{"31 transmissions", 64 << 10, 31, 3, 3000, 0, false},
		{"2 lost", 64 << 10, 32, 2, 2000, 0, false},
		{"no lost bytes", 64 << 10, 32, 3, 0, 0, false},
		{"exactly 5 %", 64 << 10, 100, 5, 5000, 0, true},
		{"under 5 %", 64 << 10, 101, 5, 5000, 0, false},
		{"no meaningful outgoing payload", 4<<10 - 1, 40, 10, 10000, 0, false},
		{"32 datagrams are meaningful payload", 2 << 10, 40, 10, 10000, 32, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := trained(t)
			f := func() Sample {
				s := c.loss(40*ms, tc.tx, tc.lost, tc.lb)
				s.Sent, s.Datagrams = tc.sent, tc.datagrams
				return s
			}
			got := feed(m, f(), f(), f())
			if tc.fires != (len(got) == 1 && got[0] == 3) {
				t.Fatalf("published at %v, want fires=%v on the third", got, tc.fires)
			}
			if tc.fires {
				if h, _ := m.Latest(c.at); h.Kind != KindLoss {
					t.Fatalf("kind %v", h.Kind)
				}
			}
		})
	}
}

// Loss also needs three consecutive lossy intervals; a qualified clean one
// starts over, while an interval too small to judge loss does not.
func TestSendLossThreeIntervals(t *testing.T) {
	m, c := trained(t)
	lossy := func() Sample { return c.loss(40*ms, 100, 10, 10000) }
	clean := func() Sample { return c.loss(40*ms, 100, 0, 0) }
	small := func() Sample { return c.loss(40*ms, 10, 0, 0) } // fewer than 32 transmissions
	if f := feed(m, lossy(), lossy(), clean(), lossy(), lossy()); f != nil {
		t.Fatalf("fired at %v", f)
	}
	if f := feed(m, small(), lossy()); len(f) != 1 || f[0] != 2 {
		t.Fatalf("published at %v: an unjudged interval broke the streak", f)
	}
}

// Unknown and idle intervals never reach Observe as samples: an Observe
// with nothing, or with a sample started before the fence, changes no
// streak, neither toward pressure nor toward recovery.
func TestIdleProvesNothing(t *testing.T) {
	m, c := trained(t)
	hi := func() Sample { return c.rtt(100 * ms) }
	feed(m, hi(), hi())
	for range 5 {
		_, end := c.next()
		m.Observe(end) // idle passes
	}
	if st := m.State(netx.V4); st.RTTPressured != 2 {
		t.Fatalf("idle passes moved the streak: %+v", st)
	}
	if f := feed(m, hi()); len(f) != 1 {
		t.Fatal("idle broke the streak")
	}
	// Disarmed now: idle passes do not rearm it.
	for range 5 {
		_, end := c.next()
		m.Observe(end)
	}
	if m.State(netx.V4).RTTArmed {
		t.Fatal("idle passes rearmed the episode")
	}
}

// After an episode, one normal interval is not enough to rearm; two are.
func TestTwoNormalIntervalsRearm(t *testing.T) {
	m, c := trained(t)
	hi, lo := func() Sample { return c.rtt(100 * ms) }, func() Sample { return c.rtt(40 * ms) }
	if f := feed(m, hi(), hi(), hi()); len(f) != 1 {
		t.Fatal("did not fire")
	}
	c.at = c.at.Add(PublishInterval) // the rate limit is not what is tested here
	if f := feed(m, lo(), hi(), hi(), hi(), hi()); f != nil {
		t.Fatalf("rearmed by one normal interval: fired at %v", f)
	}
	if m.State(netx.V4).RTTArmed {
		t.Fatal("armed after one normal interval")
	}
	if f := feed(m, lo(), lo()); f != nil || !m.State(netx.V4).RTTArmed {
		t.Fatal("two normal intervals did not rearm")
	}
	if f := feed(m, hi(), hi(), hi()); len(f) != 1 || f[0] != 3 {
		t.Fatalf("published at %v after rearming", f)
	}
}

// A slot publishes at most once per 30 s: a loss episode due 10 s after an
// RTT publication is held, and publishes at the first pressured interval
// 30 s after the first.
func TestPublishRateLimit(t *testing.T) {
	m, c := trained(t)
	feed(m, repeat(3, func() Sample { return c.rtt(100 * ms) })...)
	first, _ := m.Latest(c.at)
	var held int
	var second Hint
	for range 10 {
		s := c.loss(40*ms, 100, 10, 10000)
		r := m.Observe(s.End, s)
		if r.Held {
			held++
		}
		if r.Published {
			second = r.Hint
			break
		}
	}
	if second.Seq != 2 || second.Kind != KindLoss {
		t.Fatalf("second publication %+v", second)
	}
	const limit = 30 * time.Second // the spec's, not the constant under test
	if d := second.At.Sub(first.At); d < limit || d >= limit+step {
		t.Fatalf("second publication %v after the first, want the first interval at or past 30s", d)
	}
	if held == 0 {
		t.Fatal("no interval was held by the rate limit")
	}
	// The other family's slot has its own limit.
	s := c.rtt(40 * ms)
	s.Family = netx.V6
	v6 := []Sample{s}
	for range 3 + 3 {
		s := c.rtt(40 * ms)
		s.Family = netx.V6
		v6 = append(v6, s)
	}
	for range 3 {
		s := c.rtt(100 * ms)
		s.Family = netx.V6
		v6 = append(v6, s)
	}
	if f := feed(m, v6...); len(f) != 1 {
		t.Fatalf("V6 published at %v, want once", f)
	}
}

// A hint expires 60 s after its publication; reading it does not refresh
// it.
func TestHintExpires(t *testing.T) {
	m, c := trained(t)
	feed(m, repeat(3, func() Sample { return c.rtt(100 * ms) })...)
	at := c.at
	const lifetime = 60 * time.Second // the spec's, not the constant under test
	for _, d := range []time.Duration{0, 30 * time.Second, lifetime - time.Nanosecond} {
		if !m.Hint(at.Add(d)) {
			t.Fatalf("no hint %v after publication", d)
		}
	}
	if m.Hint(at.Add(lifetime)) {
		t.Fatal("the hint outlived 60 s despite being read")
	}
	if _, ok := m.Latest(at.Add(lifetime)); ok {
		t.Fatal("Latest returned an expired hint")
	}
}

// A reload fences prior episodes: the hint is gone, the baseline retrains,
// a streak starts over, and a sample begun before the fence is ignored.
func TestFence(t *testing.T) {
	m, c := trained(t)
	hi := func() Sample { return c.rtt(100 * ms) }
	feed(m, hi(), hi(), hi())
	if !m.Hint(c.at) {
		t.Fatal("no hint")
	}
	old := hi() // began before the fence
	m.Fence(old.Start.Add(time.Second))
	if m.Hint(c.at) {
		t.Fatal("the hint survived the fence")
	}
	m.Observe(old.End, old)
	if st := m.State(netx.V4); st.Trained || !st.RTTArmed {
		t.Fatalf("after the fence: %+v", st)
	}
	c.at = c.at.Add(PublishInterval)
	feed(m, repeat(4, func() Sample { return c.rtt(40 * ms) })...)
	if st := m.State(netx.V4); !st.Trained || st.Baseline != 40*ms {
		t.Fatalf("the baseline did not retrain: %+v", st)
	}
	if f := feed(m, hi(), hi(), hi()); len(f) != 1 {
		t.Fatal("no episode after the fence")
	}
}

// Samples of one pass for the same family are one interval: two sockets
// each sending 20 transmissions make the 32 a loss judgement needs.
func TestObserveMergesOnePass(t *testing.T) {
	m, c := trained(t)
	for i := range 3 {
		s, e := c.next()
		a := Sample{Start: s, End: e, RTT: 40 * ms, Payload: 8 << 10, Sent: 8 << 10, Transmissions: 20, Lost: 2, LostBytes: 2000}
		b := a
		r := m.Observe(e, a, b)
		if r.Published != (i == 2) {
			t.Fatalf("pass %d: %+v", i+1, r)
		}
	}
	if h, _ := m.Latest(c.at); h.Kind != KindLoss {
		t.Fatalf("kind %v", h.Kind)
	}
}

// RTT and loss due in the same interval make one publication naming both,
// and both episodes need rearming.
func TestOnePublicationForBothKinds(t *testing.T) {
	m, c := trained(t)
	var r Result
	for range 3 {
		s := c.loss(100*ms, 100, 10, 10000)
		r = m.Observe(s.End, s)
	}
	if !r.Published || r.Hint.Kind != KindRTT|KindLoss || r.Hint.Kind.String() != "rtt+loss" {
		t.Fatalf("%+v", r)
	}
	if st := m.State(netx.V4); st.RTTArmed || st.LossArmed {
		t.Fatalf("%+v", st)
	}
}
