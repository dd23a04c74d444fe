package netlab

import (
	"fmt"
	"math"
	"time"
)

// Shape changes the link while it runs: every packet from now on waits
// delay each way, and is lost with probability lossPercent/100 each way
// (0: none). With netem it is "tc qdisc change ... netem delay D loss P%"
// on both ends; on the delay line it sets the line's delay and drop rate.
// Packets already queued keep the delay they were read with, and leave in
// order.
func (p *Path) Shape(delay time.Duration, lossPercent float64) error {
	if delay < 0 || lossPercent < 0 || lossPercent > 100 || math.IsNaN(lossPercent) {
		return fmt.Errorf("netlab: shape: delay %v and loss %v%% out of range", delay, lossPercent)
	}
	if p.line != nil {
		p.line.delay.Store(int64(delay))
		p.line.lossPPM.Store(uint32(math.Round(lossPercent * 10_000)))
		p.Delay = delay
		return nil
	}
	if p.Mode != ModeNetem {
		return fmt.Errorf("netlab: shape: the path is closed")
	}
	args := []string{"root", "netem", "delay", fmt.Sprintf("%dus", delay.Microseconds())}
	if lossPercent > 0 {
		args = append(args, "loss", fmt.Sprintf("%g%%", lossPercent))
	}
	if err := run(append([]string{"tc", "qdisc", "change", "dev", p.hostDev}, args...)...); err != nil {
		return err
	}
	if err := run(append([]string{"ip", "netns", "exec", p.NS, "tc", "qdisc", "change", "dev", "syp" + p.hostDev[3:]}, args...)...); err != nil {
		return err
	}
	p.Delay = delay
	return nil
}
