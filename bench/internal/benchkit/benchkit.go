// Package benchkit is what the bench harnesses share: environment
// defaults for their flags, the NAME=ADDR,PID target syntax, and the
// readings of /proc they measure processes with.
package benchkit

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func warn(key, v, what string) {
	fmt.Fprintf(os.Stderr, "%s: ignoring %s=%q: not %s\n", filepath.Base(os.Args[0]), key, v, what)
}

// EnvDuration is the duration in the environment variable key, or def.
func EnvDuration(key string, def time.Duration) time.Duration {
	if v := os.Getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		warn(key, v, "a duration")
	}
	return def
}

// EnvInt is the integer in the environment variable key, or def.
func EnvInt(key string, def int) int {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		warn(key, v, "an integer")
	}
	return def
}

// EnvString is the environment variable key, or def when unset or empty.
func EnvString(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// ParseTarget reads NAME=ADDR,PID: a proxy under test, where it listens
// and the process to measure.
func ParseTarget(v string) (name, addr string, pid int, err error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return "", "", 0, fmt.Errorf("want NAME=ADDR,PID, got %q", v)
	}
	addr, pidText, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", 0, fmt.Errorf("want NAME=ADDR,PID, got %q", v)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", 0, fmt.Errorf("target %s: %w", name, err)
	}
	pid, err = strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return "", "", 0, fmt.Errorf("target %s: bad pid %q", name, pidText)
	}
	return name, addr, pid, nil
}

// MachineBusy is the CPU time of all CPUs spent in processes, from
// /proc/stat (user, nice, system, steal), or 0 when unreadable. Interrupt
// and softirq time are left out: on loopback they are mostly a
// benchmark's own network processing, not another process's work.
func MachineBusy() time.Duration {
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

// ProcCPU is the user+system CPU time the process has used, from
// /proc/<pid>/stat (clock ticks at the usual USER_HZ of 100), or 0 when
// unreadable or pid is not positive.
func ProcCPU(pid int) time.Duration {
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

// ProcStatusKiB reads a KiB field (VmRSS:, VmHWM:) of /proc/<pid>/status.
func ProcStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte(field))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 1 {
			break
		}
		return strconv.ParseInt(string(f[0]), 10, 64)
	}
	return 0, errors.New("no " + strings.TrimSuffix(field, ":") + " in /proc/" + strconv.Itoa(pid) + "/status")
}
