package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b float64) string {
	if b <= 0 || a < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fx", a/b)
}

func report(w io.Writer, c *config, rs []result) {
	cols := make([]string, len(rs))
	for i, r := range rs {
		cols[i] = r.router
	}
	twoWay := len(rs) == 2 && rs[0].router == "switchyard" && rs[1].router == "sing-box"
	head := fmt.Sprintf("%-40s", "")
	for _, n := range cols {
		head += fmt.Sprintf(" %16s", n)
	}
	if twoWay {
		head += fmt.Sprintf(" %16s", "switchyard/sing")
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, strings.Repeat("-", len(head)))
	row := func(label string, val func(result) (string, float64)) {
		line := fmt.Sprintf("%-40s", label)
		var nums []float64
		for _, r := range rs {
			s, v := val(r)
			line += fmt.Sprintf(" %16s", s)
			nums = append(nums, v)
		}
		if twoWay {
			line += fmt.Sprintf(" %16s", ratio(nums[0], nums[1]))
		}
		fmt.Fprintln(w, line)
	}
	row("GET /connections median", func(r result) (string, float64) { return ms(r.get.median), float64(r.get.median) })
	row("GET /connections fastest", func(r result) (string, float64) { return ms(r.get.fastest), float64(r.get.fastest) })
	row("GET /connections first call", func(r result) (string, float64) { return ms(r.get.first), float64(r.get.first) })
	row("answer size", func(r result) (string, float64) {
		return fmt.Sprintf("%.2f MB", float64(r.get.bytes)/1e6), float64(r.get.bytes)
	})
	row("router allocated per call", func(r result) (string, float64) {
		if r.get.allocBytes < 0 {
			return "-", -1
		}
		return fmt.Sprintf("%.2f MB", r.get.allocBytes/1e6), r.get.allocBytes
	})
	row("router allocations per call", func(r result) (string, float64) {
		if r.get.mallocs < 0 {
			return "-", -1
		}
		return fmt.Sprintf("%.0f", r.get.mallocs), r.get.mallocs
	})
	streamRow := func(label, prefix string, pick func(streamFigures) (string, float64)) {
		row(label, func(r result) (string, float64) {
			for _, s := range r.streams {
				if strings.HasPrefix(s.name, prefix) {
					return pick(s)
				}
			}
			return "n/a", -1
		})
	}
	cpu := func(s streamFigures) (string, float64) { return ms(s.cpu) + "/s", float64(s.cpu) }
	sent := func(s streamFigures) (string, float64) {
		return fmt.Sprintf("%.1f kB/s", s.bytesPerSecond/1e3), s.bytesPerSecond
	}
	streamRow("WebSocket /connections CPU/subscriber", "/connections", cpu)
	streamRow("WebSocket /connections sent/subscriber", "/connections", sent)
	streamRow("delta stream CPU/subscriber", "/switchyard/", cpu)
	streamRow("delta stream sent/subscriber", "/switchyard/", sent)
	row("CPU without a subscriber", func(r result) (string, float64) {
		if len(r.streams) == 0 {
			return "-", -1
		}
		return ms(r.streams[0].baseline) + "/s", float64(r.streams[0].baseline)
	})
	row("VmRSS holding the flows", func(r result) (string, float64) {
		return fmt.Sprintf("%d MiB", r.rssKiB>>10), float64(r.rssKiB)
	})
	fmt.Fprintf(w, "\nstream CPU: the router's, per second, with the stream's subscribers (WebSocket /connections: 1; the delta stream /switchyard/v1/connections: %d) at interval %v, less without, divided by the subscribers; %d flows moving per second\n", c.deltaSubs, c.interval, c.changing)
	if twoWay {
		fmt.Fprintf(w, "target: GET /connections median at most 0.5x sing-box's: %s\n", ratio(float64(rs[0].get.median), float64(rs[1].get.median)))
	}
}
