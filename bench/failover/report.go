package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// summary is every trial of one router.
type summary struct {
	router      string
	interval    time.Duration
	setInterval bool
	trials      []trial
}

// median of sorted copies: the middle value, or the mean of the two middle
// ones.
func median[T int | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func report(w io.Writer, c *config, sums []summary) {
	fmt.Fprintf(w, "results (%d trial(s) per router; a flow every %v; recovered = flows succeed through the other upstream for %v)\n", c.trials, c.pace, c.steady)
	fmt.Fprintf(w, "%-10s  %-14s  %6s  %-13s  %-25s  %-22s  %s\n",
		"router", "interval", "trials", "failed flows", "time to recover", "flows back after", "back during")
	fmt.Fprintf(w, "%-10s  %-14s  %6s  %-13s  %-25s  %-22s  %s\n",
		"", "", "", "median / max", "median / max", "re-probe, total (of)", "re-probe wait")
	for _, s := range sums {
		var failed, back, during, flapFlows, waitFlows []int
		var rec []time.Duration
		unrecovered, unmeasured := 0, 0
		for _, t := range s.trials {
			failed = append(failed, t.failed)
			if !t.recovered {
				unrecovered++
				continue
			}
			rec = append(rec, t.recover)
			if !t.remeasured {
				unmeasured++
			}
			back = append(back, t.flapBack)
			flapFlows = append(flapFlows, t.flapFlows)
			during = append(during, t.waitBack)
			waitFlows = append(waitFlows, t.waitFlows)
		}
		interval := s.interval.String()
		if !s.setInterval {
			interval += " (default)"
		}
		recText := "none recovered"
		if len(rec) > 0 {
			recText = fmt.Sprintf("%s / %s", msText(median(rec)), msText(slices.Max(rec)))
			if unrecovered > 0 {
				recText += fmt.Sprintf(" (%d not)", unrecovered)
			}
		}
		fmt.Fprintf(w, "%-10s  %-14s  %6d  %-13s  %-25s  %-22s  %s\n",
			s.router, interval, len(s.trials),
			fmt.Sprintf("%d / %d", median(failed), slices.Max(failed)),
			recText,
			fmt.Sprintf("%d (of %d)", sum(back), sum(flapFlows))+unmeasuredNote(unmeasured),
			fmt.Sprintf("%d (of %d)", sum(during), sum(waitFlows)))
	}
	var notes []string
	for _, s := range sums {
		for i, t := range s.trials {
			if t.preSwitches > 0 || t.preFailed > 0 || t.failedRestart > 0 {
				notes = append(notes, fmt.Sprintf("%s trial %d: %d switches and %d failed flows before the kill, %d failed flows after the restart",
					s.router, i+1, t.preSwitches, t.preFailed, t.failedRestart))
			}
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nnotes:\n  %s\n", strings.Join(notes, "\n  "))
	}
}

func unmeasuredNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d never re-probed)", n)
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}
