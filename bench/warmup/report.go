package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// quantile is the q-quantile of ds by the nearest rank.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// printFirstBytes prints each client's median, p90, min and max time to
// the first byte, in milliseconds and round trips, and the ratio of
// switchyard warm's median to the best anchor's (Xray's or sing-box's).
func printFirstBytes(c *config, rtt time.Duration, results map[string][]time.Duration) {
	fmt.Println("time to the first byte of a new flow (SOCKS5 connect, CONNECT, request, first response byte)")
	fmt.Printf("%-20s %5s %10s %10s %10s %10s %8s\n", "client", "flows", "median", "p90", "min", "max", "med/RTT")
	for _, name := range c.clients {
		ds, ok := results[name]
		if !ok {
			continue
		}
		med := quantile(ds, 0.5)
		fmt.Printf("%-20s %5d %10s %10s %10s %10s %8.2f\n", name, len(ds), ms(med), ms(quantile(ds, 0.9)),
			ms(slices.Min(ds)), ms(slices.Max(ds)), float64(med)/float64(rtt))
	}
	var best string
	for _, name := range []string{clientXray, clientSing} {
		if ds, ok := results[name]; ok && (best == "" || quantile(ds, 0.5) < quantile(results[best], 0.5)) {
			best = name
		}
	}
	warm, ok := results[clientWarm]
	if best == "" || !ok {
		fmt.Println("\nratio: needs switchyard warm and at least one anchor (xray, sing-box)")
		return
	}
	ratio := float64(quantile(warm, 0.5)) / float64(quantile(results[best], 0.5))
	verdict := "meets"
	if ratio > 0.5 {
		verdict = "misses"
	}
	fmt.Printf("\nswitchyard warm / best anchor (%s), medians: %.2f× (target ≤ 0.50×: %s)\n", best, ratio, verdict)
	if off, ok := results[clientOff]; ok {
		fmt.Printf("switchyard off / best anchor (%s), medians: %.2f×\n", best, float64(quantile(off, 0.5))/float64(quantile(results[best], 0.5)))
	}
}

// printMemory prints switchyard's VmRSS and descriptors at each reading,
// warm-up on and off, and what warm-up holds: on minus off.
func printMemory(c *config, mem map[string][]reading) {
	fmt.Printf("\nmemory: switchyard with %d nodes (VLESS and Trojan over TLS) in one Selector and one URLTest\n", c.nodes)
	fmt.Printf("%-6s %8s %12s %6s %8s\n", "warmup", "at", "VmRSS", "fds", "sockets")
	for _, mode := range []string{"on", "off"} {
		for _, r := range mem[mode] {
			fmt.Printf("%-6s %8v %9d KiB %6d %8d\n", mode, r.at, r.rssKiB, r.fds, r.sockets)
		}
	}
	on, off := mem["on"], mem["off"]
	if len(on) == 0 || len(on) != len(off) {
		return
	}
	fmt.Println("held by warm-up (on − off):")
	for i := range on {
		fmt.Printf("  at %v: %+d KiB, %+d descriptors (%+d sockets)\n", on[i].at, on[i].rssKiB-off[i].rssKiB, on[i].fds-off[i].fds, on[i].sockets-off[i].sockets)
	}
}
