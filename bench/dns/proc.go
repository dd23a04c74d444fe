package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
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
		machine: machineBusy(),
		self:    procCPU(os.Getpid()),
		router:  procCPU(router),
		stub:    procCPU(stub),
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

// machineBusy is the CPU time of all CPUs spent in processes, from
// /proc/stat (user, nice, system, steal), or 0 when unreadable. Interrupt
// and softirq time are left out: on loopback they are mostly this
// benchmark's own network processing.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 8} { // user, nice, system, steal
		v, _ := strconv.ParseInt(string(f[i]), 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// procCPU is the user+system CPU time the process has used, from
// /proc/<pid>/stat (clock ticks at the usual USER_HZ of 100), or 0 when
// unreadable or pid is 0.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	// After the command: state is field 3 of the line, utime 14, stime 15.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(string(f[11]), 10, 64)
	st, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// procPeakRSS reads VmHWM (KiB) from /proc/<pid>/status: the largest
// resident set the process has had since it started.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 1 {
			break
		}
		return strconv.ParseInt(string(f[0]), 10, 64)
	}
	return 0, errors.New("no VmHWM in /proc/" + strconv.Itoa(pid) + "/status")
}
