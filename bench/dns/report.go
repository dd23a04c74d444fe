package main

import (
	"fmt"
	"os"
	"strings"
	"switchyard/bench/internal/benchkit"
	"text/tabwriter"
)

// targetRatio is the subject's queries per second over the baseline's, in each
// mode.
const targetRatio = 1.2

// summary is what the runs of one mode against one target add up to: the
// best run (noise only ever slows a run down) and the tallies of all.
type summary struct {
	best                    runResult
	runs                    int
	sent, lost, bad, late   int64
	stubQueries, answered   int64 // over the windows of every run whose stub count was read
	ended                   int
	anyDisturbed, stubKnown bool
}

func summarize(rs []runResult, name, mode string) (s summary, ok bool) {
	s.stubKnown = true
	for _, r := range rs {
		if r.target != name || r.mode != mode {
			continue
		}
		if !ok || r.qps > s.best.qps {
			s.best = r
		}
		ok = true
		s.runs++
		s.sent += r.sent
		s.lost += r.lost + r.warmupLost
		s.bad += r.bad
		s.late += r.late
		s.ended += r.ended
		s.anyDisturbed = s.anyDisturbed || r.disturbed
		if r.stubQueries < 0 {
			s.stubKnown = false
		} else {
			s.stubQueries += r.stubQueries
			s.answered += r.answered
		}
	}
	return s, ok
}

func report(c *loadConfig, rs []runResult) {
	names := make([]string, len(c.targets))
	for i, t := range c.targets {
		names[i] = t.name
	}
	pair := len(names) == 2
	fmt.Println()
	head := fmt.Sprintf("results (best run of %d round(s), %v each, %d associations x %d in flight", c.rounds, c.duration, c.assocs, c.depth)
	if pair {
		head += fmt.Sprintf("; ratio = %s/%s", names[0], names[1])
	}
	fmt.Println(head + ")")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"mode"}
	for _, n := range names {
		cols = append(cols, n+" q/s")
	}
	if pair {
		cols = append(cols, "ratio")
	}
	for _, n := range names {
		cols = append(cols, "lost "+n)
	}
	for _, n := range names {
		cols = append(cols, "CPU ms/1k "+n)
	}
	if pair {
		cols = append(cols, "ratio")
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")

	sums := map[string][]summary{}
	for _, mode := range c.modes {
		var ss []summary
		for _, n := range names {
			s, _ := summarize(rs, n, mode)
			ss = append(ss, s)
		}
		sums[mode] = ss
		row := []string{mode}
		for _, s := range ss {
			row = append(row, fmt.Sprintf("%.0f%s", s.best.qps, star(s.best.disturbed)))
		}
		if pair {
			row = append(row, ratio(ss[0].best.qps, ss[1].best.qps))
		}
		for _, s := range ss {
			row = append(row, fmt.Sprintf("%d/%d", s.lost+s.bad, s.sent))
		}
		for _, s := range ss {
			row = append(row, fmt.Sprintf("%.1f", s.best.cpuPer1k()))
		}
		if pair {
			row = append(row, ratio(ss[0].best.cpuPer1k(), ss[1].best.cpuPer1k()))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()

	fmt.Println()
	fmt.Println("q/s: valid answers per second in the measured window; lost: queries without a valid answer")
	fmt.Println("over every run of the mode (lost + wrong answers) / queries sent; CPU ms/1k: the router's")
	fmt.Println("user+system CPU per 1,000 answers in the best run. * = a run disturbed by other processes.")
	var peaks []string
	for _, t := range c.targets {
		if kib, err := benchkit.ProcStatusKiB(t.pid, "VmHWM:"); err == nil {
			peaks = append(peaks, fmt.Sprintf("%s %.1f", t.name, float64(kib)/1024))
		}
	}
	fmt.Println("peak RSS MiB (VmHWM, the whole run):", strings.Join(peaks, ", "))

	fmt.Println()
	fmt.Println("checks:")
	for _, mode := range c.modes {
		var parts []string
		for i, s := range sums[mode] {
			switch {
			case !s.stubKnown:
				parts = append(parts, names[i]+" unknown")
			case mode == "warm":
				parts = append(parts, fmt.Sprintf("%s %d", names[i], s.stubQueries))
			case s.answered > 0:
				parts = append(parts, fmt.Sprintf("%s %.3f", names[i], float64(s.stubQueries)/float64(s.answered)))
			default:
				parts = append(parts, names[i]+" no answers")
			}
		}
		if mode == "warm" {
			fmt.Printf("  warm: queries reaching the stub in the measured windows (0: every answer from the cache): %s\n", strings.Join(parts, ", "))
		} else {
			fmt.Printf("  cold: stub queries per valid answer (1: each answer asked of the stub once): %s\n", strings.Join(parts, ", "))
		}
		for i, s := range sums[mode] {
			var issues []string
			if s.lost > 0 {
				issues = append(issues, fmt.Sprintf("%d lost", s.lost))
			}
			if s.bad > 0 {
				issues = append(issues, fmt.Sprintf("%d wrong answers (first: %s)", s.bad, firstBad(rs, names[i], mode)))
			}
			if s.late > 0 {
				issues = append(issues, fmt.Sprintf("%d late or repeated answers", s.late))
			}
			if s.ended > 0 {
				issues = append(issues, fmt.Sprintf("%d associations closed by the router", s.ended))
			}
			if len(issues) > 0 {
				fmt.Printf("  %s, %s: %s\n", mode, names[i], strings.Join(issues, ", "))
			}
		}
	}
	if pair {
		for _, mode := range c.modes {
			ss := sums[mode]
			v := 0.0
			if ss[1].best.qps > 0 {
				v = ss[0].best.qps / ss[1].best.qps
			}
			verdict := "met"
			if v < targetRatio {
				verdict = "NOT met"
			}
			fmt.Printf("  target %s q/s >= %.1fx %s: %.2fx %s\n", mode, targetRatio, names[1], v, verdict)
		}
	}
}

func firstBad(rs []runResult, name, mode string) string {
	for _, r := range rs {
		if r.target == name && r.mode == mode && r.firstBad != "" {
			return r.firstBad
		}
	}
	return "?"
}

func star(b bool) string {
	if b {
		return "*"
	}
	return ""
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
