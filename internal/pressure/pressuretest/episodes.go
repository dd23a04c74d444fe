//go:build linux

// Package pressuretest drives a real carrier through the delay, loss and
// recovery phases of the carrier-pressure rules on a netlab path, for the
// tests of every sampler (TCP_INFO, QUIC statistics).
package pressuretest

import (
	"net"
	"sync"
	"testing"
	"time"

	"switchyard/internal/pressure"
	"switchyard/netx"
	"switchyard/test/netem/netlab"
)

// Plan is the path's shape in each phase.
type Plan struct {
	Base, Slow time.Duration // delay each way: the baseline, then the slow phase
	Loss       float64       // loss percent each way in the loss phase
}

// DefaultPlan: a 10 ms path, then 40 ms (an 80 ms RTT against a 20 ms
// baseline: 4x and 60 ms above), then 10 % loss.
var DefaultPlan = Plan{Base: 10 * time.Millisecond, Slow: 40 * time.Millisecond, Loss: 10}

// Pass is the interval between two samplings: past MinInterval, so every
// pass closes an interval.
const Pass = 1100 * time.Millisecond

// Upload writes to c at an application-limited rate (16 KiB every 10 ms,
// 1.6 MB/s: no queue builds on the path) until stop is called, which
// unblocks a pending write with a deadline and waits for the writer.
func Upload(c net.Conn) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 16<<10)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			c.SetWriteDeadline(time.Now())
			wg.Wait()
		})
	}
}

// Run drives s, a carrier under upload over p, through the phases and
// checks the Monitor's verdicts: the baseline trains; the slow phase
// publishes an RTT hint after at least three pressured passes; the loss
// phase's episode is held by the 30 s publication limit and published as
// a loss hint once it has passed; back to normal, the loss episode is
// still disarmed after one pass and rearms within a few. It returns the
// monitor.
func Run(t *testing.T, p *netlab.Path, s pressure.Sampler, plan Plan) *pressure.Monitor {
	t.Helper()
	m := &pressure.Monitor{}
	family := netx.FamilyOf(p.PeerAddr)
	pass := func() pressure.Result {
		time.Sleep(Pass)
		at := time.Now()
		samples := s.Sample(at)
		r := m.Observe(at, samples...)
		for _, smp := range samples {
			t.Logf("%s: rtt %v payload %d sent %d tx %d lost %d (%d B) -> %+v",
				at.Format("15:04:05.000"), smp.RTT, smp.Payload, smp.Sent, smp.Transmissions, smp.Lost, smp.LostBytes, r)
		}
		if len(samples) == 0 {
			t.Logf("%s: no active interval", at.Format("15:04:05.000"))
		}
		return r
	}
	shape := func(delay time.Duration, loss float64) {
		t.Helper()
		if err := p.Shape(delay, loss); err != nil {
			t.Fatal(err)
		}
	}

	shape(plan.Base, 0)
	for i := 0; !m.State(family).Trained; i++ {
		if i == 10 {
			t.Fatal("the baseline did not train in 10 passes")
		}
		if r := pass(); r.Published {
			t.Fatalf("published while training: %+v", r.Hint)
		}
	}
	baseline := m.State(family).Baseline
	t.Logf("baseline %v (path %v)", baseline, 2*plan.Base)

	shape(plan.Slow, 0)
	var rtt pressure.Hint
	for i := 1; ; i++ {
		if i == 10 {
			t.Fatal("no RTT hint in 10 passes of the slow phase")
		}
		r := pass()
		if r.Published {
			if i < pressure.PressureStreak {
				t.Fatalf("published at pass %d of the slow phase, before %d pressured intervals", i, pressure.PressureStreak)
			}
			rtt = r.Hint
			break
		}
	}
	if rtt.Kind != pressure.KindRTT || rtt.Family != family || !m.Hint(time.Now()) {
		t.Fatalf("RTT hint %+v", rtt)
	}

	shape(plan.Base, plan.Loss)
	var loss pressure.Hint
	held := 0
	for {
		if time.Since(rtt.At) > pressure.PublishInterval+15*time.Second {
			t.Fatalf("no loss hint %v after the RTT hint (%d passes held)", time.Since(rtt.At), held)
		}
		r := pass()
		if r.Held {
			held++
		}
		if r.Published {
			loss = r.Hint
			break
		}
	}
	if loss.Kind&pressure.KindLoss == 0 || loss.Seq != rtt.Seq+1 {
		t.Fatalf("loss hint %+v after %+v", loss, rtt)
	}
	if gap := loss.At.Sub(rtt.At); gap < pressure.PublishInterval {
		t.Fatalf("the loss hint came %v after the RTT hint, inside the 30 s limit", gap)
	}
	if held == 0 {
		t.Fatal("the loss episode was never held by the publication limit: it became due only after 30 s")
	}
	t.Logf("loss hint %v after the RTT hint, held for %d passes", loss.At.Sub(rtt.At), held)

	shape(plan.Base, 0)
	if pass(); m.State(family).LossArmed {
		t.Fatal("the loss episode rearmed after one pass")
	}
	for i := 1; !m.State(family).LossArmed; i++ {
		if i == 8 {
			t.Fatal("the loss episode did not rearm in 8 normal passes")
		}
		pass()
	}
	return m
}
