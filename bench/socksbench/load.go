package main

import (
	"os"
	"switchyard/bench/internal/benchkit"
	"time"
)

// busyThreshold is the CPU (in cores) that processes other than the proxy
// under test and this harness may use before a run counts as disturbed.
const busyThreshold = 0.25

// cpuMark is a point-in-time reading of CPU time: the whole machine's busy
// time, this process's, and the proxy's.
type cpuMark struct {
	at                time.Time
	machine, self, px time.Duration
}

func markCPU(pid int) cpuMark {
	return cpuMark{at: time.Now(), machine: benchkit.MachineBusy(), self: benchkit.ProcCPU(os.Getpid()), px: benchkit.ProcCPU(pid)}
}

// loadSince reports, in cores averaged since m, the proxy's CPU use and the
// CPU used by everything else on the machine except this harness.
func loadSince(m cpuMark, pid int) (proxy, other float64) {
	n := markCPU(pid)
	secs := n.at.Sub(m.at).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	proxy = (n.px - m.px).Seconds() / secs
	other = ((n.machine - m.machine) - (n.self - m.self) - (n.px - m.px)).Seconds() / secs
	return proxy, max(other, 0)
}

// waitQuiet waits, up to limit, until the machine's CPU use other than this
// harness and the proxy stays under busyThreshold for a second. It returns
// the last reading of that use and how long it waited.
func waitQuiet(pid int, limit time.Duration) (other float64, waited time.Duration) {
	if limit <= 0 {
		return 0, 0
	}
	start := time.Now()
	for {
		m := markCPU(pid)
		time.Sleep(time.Second)
		_, other = loadSince(m, pid)
		if other < busyThreshold || time.Since(start) >= limit {
			return other, time.Since(start)
		}
	}
}
