package main

import (
	"os"
	"switchyard/bench/internal/benchkit"
	"time"
)

// busyThreshold is the CPU (in cores) that processes other than the router
// under test, the stub and this generator may use before a run counts as
// disturbed.
const busyThreshold = 0.25

// cpuMark is a point-in-time reading of CPU time: the whole machine's busy
// time, this process's, the router's and the stub's.
type cpuMark struct {
	at                          time.Time
	machine, self, router, stub time.Duration
}

func markCPU(router, stub int) cpuMark {
	return cpuMark{
		at:      time.Now(),
		machine: benchkit.MachineBusy(),
		self:    benchkit.ProcCPU(os.Getpid()),
		router:  benchkit.ProcCPU(router),
		stub:    benchkit.ProcCPU(stub),
	}
}

// cpuUse is what a run used between two marks: CPU seconds of the router
// and the stub, and the cores (averaged) used by everything else but this
// generator.
type cpuUse struct {
	secs         float64 // wall seconds between the marks
	router, stub float64 // CPU seconds
	other        float64 // cores
}

func (m cpuMark) since(prev cpuMark) cpuUse {
	u := cpuUse{
		secs:   m.at.Sub(prev.at).Seconds(),
		router: (m.router - prev.router).Seconds(),
		stub:   (m.stub - prev.stub).Seconds(),
	}
	if u.secs > 0 {
		rest := (m.machine - prev.machine) - (m.self - prev.self) - (m.router - prev.router) - (m.stub - prev.stub)
		u.other = max(rest.Seconds()/u.secs, 0)
	}
	return u
}

// waitQuiet waits, up to limit, until the machine's CPU use other than
// this generator, the router and the stub stays under busyThreshold for a
// second. It returns the last reading of that use.
func waitQuiet(router, stub int, limit time.Duration) float64 {
	if limit <= 0 {
		return 0
	}
	start := time.Now()
	for {
		m := markCPU(router, stub)
		time.Sleep(time.Second)
		other := markCPU(router, stub).since(m).other
		if other < busyThreshold || time.Since(start) >= limit {
			return other
		}
	}
}
