// The results table: per-target summaries, ratios against the baselines and
// the targets met.

package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func names(ts []target) string {
	var n []string
	for _, t := range ts {
		n = append(n, fmt.Sprintf("%s at %s (pid %d)", t.name, t.addr, t.pid))
	}
	return strings.Join(n, ", ")
}

func failNote(n int, first string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  [%d failed: %s]", n, first)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// summary is the figure of each metric for one target.
type summary struct {
	up, down, rate float64
	// proxy CPU per unit of work in the same run as the figure above:
	// seconds per GiB moved, microseconds per connection.
	upCPU, downCPU, rateCPU float64
	p50, p99                time.Duration
	memKiB, fds             float64
	peakMiB                 float64
	has                     map[string]bool
	disturbed               map[string]bool // the run behind the figure was DISTURBED
}

func summarize(r *results) summary {
	s := summary{has: map[string]bool{}, disturbed: map[string]bool{}}
	for _, b := range r.up {
		if b.MiBps > s.up {
			s.up, s.upCPU = b.MiBps, b.CPU/(b.MiBps/1024)
			s.has["up"], s.disturbed["up"] = true, b.Other >= busyThreshold
		}
	}
	for _, b := range r.down {
		if b.MiBps > s.down {
			s.down, s.downCPU = b.MiBps, b.CPU/(b.MiBps/1024)
			s.has["down"], s.disturbed["down"] = true, b.Other >= busyThreshold
		}
	}
	for _, rr := range r.rate {
		if rr.Count > 0 && rr.PerSec > s.rate {
			s.rate, s.p50, s.p99 = rr.PerSec, rr.P50, rr.P99
			s.rateCPU = rr.CPU / rr.PerSec * 1e6
			s.has["rate"], s.disturbed["rate"] = true, rr.Other >= busyThreshold
		}
	}
	var mem, fds []float64
	for _, b := range r.mem {
		if b.Conns > 0 {
			mem = append(mem, b.PerConnKiB)
			fds = append(fds, b.FDsPerConn)
		}
	}
	if len(mem) > 0 {
		s.memKiB, s.fds = median(mem), median(fds)
		s.has["mem"] = true
	}
	if r.peakKiB > 0 {
		s.peakMiB = float64(r.peakKiB) / 1024
		s.has["peak"] = true
	}
	return s
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func report(w io.Writer, c *config, res []*results) {
	sums := make([]summary, len(res))
	for i, r := range res {
		sums[i] = summarize(r)
	}
	base := len(c.targets) - 1 // baselines: targets 1..base
	how := fmt.Sprintf("best run of %d round(s)", c.rounds)
	if c.retries > 0 {
		how += fmt.Sprintf(", a disturbed run retried up to %d times", c.retries)
	}
	for j := 1; j <= base; j++ {
		sep := "; "
		if j > 1 {
			sep = ", "
		}
		how += fmt.Sprintf("%s%s = %s/%s", sep, ratioHead(c, j), c.targets[0].name, c.targets[j].name)
	}
	fmt.Fprintf(w, "results (%s)\n", how)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "metric\t"
	for _, t := range c.targets {
		head += t.name + "\t"
	}
	for j := 1; j <= base; j++ {
		head += ratioHead(c, j) + "\t"
	}
	if base > 0 {
		head += "better\t"
	}
	fmt.Fprintln(tw, head)

	type row struct {
		phase, label string
		val          func(summary) float64
		format       string
		better       string
	}
	rows := []row{
		{"up", fmt.Sprintf("upload MiB/s (%d streams)", c.streams), func(s summary) float64 { return s.up }, "%.1f", "higher"},
		{"down", fmt.Sprintf("download MiB/s (%d streams)", c.streams), func(s summary) float64 { return s.down }, "%.1f", "higher"},
		{"rate", fmt.Sprintf("connections/s (%d workers)", c.workers), func(s summary) float64 { return s.rate }, "%.0f", "higher"},
		{"rate", "p50 connect-to-first-byte ms", func(s summary) float64 { return float64(s.p50) / 1e6 }, "%.2f", "lower"},
		{"rate", "p99 connect-to-first-byte ms", func(s summary) float64 { return float64(s.p99) / 1e6 }, "%.2f", "lower"},
		{"up", "proxy CPU s per GiB, upload", func(s summary) float64 { return s.upCPU }, "%.3f", "lower"},
		{"down", "proxy CPU s per GiB, download", func(s summary) float64 { return s.downCPU }, "%.3f", "lower"},
		{"rate", "proxy CPU us per connection", func(s summary) float64 { return s.rateCPU }, "%.0f", "lower"},
		{"mem", fmt.Sprintf("KiB RSS per idle conn (%d)", c.conns), func(s summary) float64 { return s.memKiB }, "%.1f", "lower"},
		{"mem", "open fds per idle conn", func(s summary) float64 { return s.fds }, "%.1f", "lower"},
		{"peak", "peak RSS MiB (VmHWM, whole run)", func(s summary) float64 { return s.peakMiB }, "%.1f", "lower"},
	}
	starred := false
	for _, rw := range rows {
		if rw.phase != "peak" && !c.only[rw.phase] {
			continue
		}
		line := rw.label + "\t"
		for _, s := range sums {
			if s.has[rw.phase] {
				mark := ""
				if s.disturbed[rw.phase] {
					mark, starred = "*", true
				}
				line += fmt.Sprintf(rw.format, rw.val(s)) + mark + "\t"
			} else {
				line += "error\t"
			}
		}
		for j := 1; j <= base; j++ {
			line += ratioText(sums, j, rw.phase, rw.val) + "\t"
		}
		if base > 0 {
			line += rw.better + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	if starred {
		fmt.Fprintln(w, "* the run behind this figure was DISTURBED by other processes; read it with care")
	}

	for i, r := range res {
		for _, e := range r.errs {
			fmt.Fprintf(w, "error: %s: %s\n", c.targets[i].name, e)
		}
	}
	for j := 1; j <= base; j++ {
		targetsMet(w, c, sums, j)
	}
}

// ratioHead names the ratio column of baseline j: "ratio" when there is
// one baseline, as the report always read, else "/NAME".
func ratioHead(c *config, j int) string {
	if len(c.targets) == 2 {
		return "ratio"
	}
	return "/" + c.targets[j].name
}

// targetsMet prints the subject's targets against baseline j.
func targetsMet(w io.Writer, c *config, sums []summary, j int) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "targets (%s vs %s):\n", c.targets[0].name, c.targets[j].name)
	if c.only["up"] || c.only["down"] {
		var parts []string
		met := true
		for _, p := range []struct {
			phase, name string
			val         func(summary) float64
		}{
			{"up", "upload", func(s summary) float64 { return s.up }},
			{"down", "download", func(s summary) float64 { return s.down }},
		} {
			if !c.only[p.phase] {
				continue
			}
			r, ok := ratio(sums, j, p.phase, p.val)
			parts = append(parts, p.name+" "+ratioText(sums, j, p.phase, p.val))
			met = met && ok && r >= 1.0
		}
		fmt.Fprintf(w, "  throughput >= 1.0x:                 %-32s %s\n", strings.Join(parts, ", "), verdict(met))
	}
	if c.only["rate"] {
		val := func(s summary) float64 { return s.rate }
		r, ok := ratio(sums, j, "rate", val)
		fmt.Fprintf(w, "  connection rate >= 1.0x:            %-32s %s\n", ratioText(sums, j, "rate", val), verdict(ok && r >= 1.0))
	}
	if c.only["mem"] {
		val := func(s summary) float64 { return s.memKiB }
		r, ok := ratio(sums, j, "mem", val)
		fmt.Fprintf(w, "  memory per idle conn <= 0.7x:       %-32s %s (lower is better)\n",
			ratioText(sums, j, "mem", val), verdict(ok && r <= 0.7))
	}
	val := func(s summary) float64 { return s.peakMiB }
	r, ok := ratio(sums, j, "peak", val)
	fmt.Fprintf(w, "  peak RSS <= 1.0x:                   %-32s %s (lower is better)\n",
		ratioText(sums, j, "peak", val), verdict(ok && r <= 1.0))
}

// ratio is the subject's figure over baseline j's.
func ratio(sums []summary, j int, phase string, val func(summary) float64) (float64, bool) {
	if !sums[0].has[phase] || !sums[j].has[phase] || val(sums[j]) <= 0 {
		return 0, false
	}
	return val(sums[0]) / val(sums[j]), true
}

func ratioText(sums []summary, j int, phase string, val func(summary) float64) string {
	r, ok := ratio(sums, j, phase, val)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", r)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT MET"
}
