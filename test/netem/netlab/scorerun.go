package netlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A LabFlow is one GET through switchyard to a site of a ScoreLab.
type LabFlow struct {
	Round   int
	Site    string
	Blocked bool          // a site node A blackholes
	Err     error         // nil: the whole response came
	TTFB    time.Duration // with Err nil
	Elapsed time.Duration // from the start until the response or the error
	// Carrier is the node whose connection brought the site the request
	// ("A", "B"), from the site's record of its source; "" when no request
	// came (a blackholed flow).
	Carrier string
	// Chain is the node switchyard's flow table named for the flow while
	// it was open ("A", "B"), or "" when the API did not list it.
	Chain string
	// Reasons are the Score reason and candidate counters that moved
	// while the flow ran (its rank's, and a retry's), read from the
	// API's Score statistics after the flow; "" without a Score group.
	Reasons string
}

// A LabRun is the flows of one policy, in the order they ran.
type LabRun struct {
	Policy string
	Flows  []LabFlow
}

// Drive runs lead rounds and then rounds rounds through the proxy at
// proxy (switchyard's mixed inbound, a SOCKS5 client here): in each, one
// new flow to every site, one after the other, open and blocked sites
// alternating; the lead rounds go to the open sites only (a history of A
// serving them before the blocked sites are first asked for). Each flow
// GETs a path of its own (label, site, round) and is bounded by timeout.
// With api (switchyard's API, host:port) the flow's chain is read from
// /connections between the CONNECT reply and the request; that read is
// not in the flow's figures. gap separates two flows.
func (l *ScoreLab) Drive(policy, label, proxy, api string, lead, rounds int, timeout, gap time.Duration) *LabRun {
	run := &LabRun{Policy: policy}
	order := interleave(l.Open, l.Blocked)
	var counters map[string]int64 // the Score counters before the flow
	if api != "" {
		counters, _ = scoreCounters(api)
	}
	for r := range lead + rounds {
		sites := order
		if r < lead {
			sites = l.Open
		}
		for _, site := range sites {
			path := fmt.Sprintf("/%s/%s/%d", label, strings.ReplaceAll(site, ":", "_"), r)
			f := LabFlow{Round: r, Site: site, Blocked: slices.Contains(l.Blocked, site)}
			var (
				between func(netip.AddrPort)
				read    time.Duration // the API read, not the flow's
			)
			if api != "" {
				between = func(local netip.AddrPort) {
					t := time.Now()
					f.Chain = l.chainOf(api, local)
					read = time.Since(t)
				}
			}
			start := time.Now()
			got, err := Fetch(proxy, site, path, timeout, between)
			f.Elapsed = time.Since(start) - read
			f.Err = err
			if err == nil {
				f.TTFB = got.TTFB()
			}
			if src, ok := l.Sites.Source(path); ok {
				f.Carrier = l.Node(src)
				if f.Carrier == "" {
					f.Carrier = "?" + src.String()
				}
			}
			if len(counters) > 0 { // a Score group to read
				if now, err := scoreCounters(api); err == nil {
					f.Reasons = movedCounters(counters, now)
					counters = now
				}
			}
			run.Flows = append(run.Flows, f)
			if gap > 0 {
				time.Sleep(gap)
			}
		}
	}
	return run
}

func interleave(a, b []string) []string {
	var out []string
	for i := range max(len(a), len(b)) {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}

// chainOf reads the node of the open flow whose source is local from the
// API's /connections snapshot.
func (l *ScoreLab) chainOf(api string, local netip.AddrPort) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/connections")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Connections []struct {
			Metadata struct {
				SourcePort string `json:"sourcePort"`
			} `json:"metadata"`
			Chains []string `json:"chains"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return ""
	}
	port := strconv.Itoa(int(local.Port()))
	for _, conn := range body.Connections {
		if conn.Metadata.SourcePort != port {
			continue
		}
		for _, hop := range conn.Chains {
			switch hop {
			case OutboundA:
				return "A"
			case OutboundB:
				return "B"
			}
		}
	}
	return ""
}

// A SiteSummary is one site's flows of a run.
type SiteSummary struct {
	Site      string
	Blocked   bool
	Flows, OK int
	Median    time.Duration // of the successful flows' TTFB
	ViaA      int           // successful flows node A carried (the site's record)
	ViaB      int
	FailedA   int // failed flows switchyard's flow table put on node A
	FailedB   int
	Sequence  string // per flow in order: A or B for a success by that node, x for a failure
	// Reasons is per flow in order its Sequence letter and the Score
	// counters that moved during it (LabFlow.Reasons), for a failure's
	// report: "A(incumbentHeld) B(periodicExplore) ...".
	Reasons string
}

// Summary is the run's per-site figures, in the order of sites.
func (r *LabRun) Summary(sites []string) []SiteSummary {
	var out []SiteSummary
	for _, site := range sites {
		s := SiteSummary{Site: site}
		var ttfb []time.Duration
		for _, f := range r.Flows {
			if f.Site != site {
				continue
			}
			s.Blocked = f.Blocked
			s.Flows++
			switch {
			case f.Err == nil:
				s.OK++
				ttfb = append(ttfb, f.TTFB)
				switch f.Carrier {
				case "A":
					s.ViaA++
				case "B":
					s.ViaB++
				}
				s.Sequence += f.Carrier
			default:
				switch f.Chain {
				case "A":
					s.FailedA++
				case "B":
					s.FailedB++
				}
				s.Sequence += "x"
			}
			if f.Reasons != "" {
				if s.Reasons != "" {
					s.Reasons += " "
				}
				s.Reasons += fmt.Sprintf("%s(%s)", s.Sequence[len(s.Sequence)-1:], f.Reasons)
			}
		}
		if len(ttfb) > 0 {
			slices.Sort(ttfb)
			s.Median = ttfb[len(ttfb)/2]
		}
		out = append(out, s)
	}
	return out
}

// LabTable is the per-site table of runs: success rate and median time to
// the first byte per site and policy, which node carried the successes,
// where the failures were, and every flow in order.
func LabTable(sites []string, runs ...*LabRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-22s %-9s %5s %6s %11s %5s %5s %9s  %s\n",
		"policy", "site", "at A", "flows", "ok", "median TTFB", "via A", "via B", "failed@A", "flows in order (A/B: served by, x: failed)")
	for _, r := range runs {
		for _, s := range r.Summary(sites) {
			at := "served"
			if s.Blocked {
				at = "blocked"
			}
			med := "-"
			if s.OK > 0 {
				med = fmt.Sprintf("%.1f ms", float64(s.Median)/float64(time.Millisecond))
			}
			fmt.Fprintf(&b, "%-8s %-22s %-9s %5d %5.0f%% %11s %5d %5d %9d  %s\n",
				r.Policy, s.Site, at, s.Flows, 100*float64(s.OK)/float64(max(s.Flows, 1)), med, s.ViaA, s.ViaB, s.FailedA, s.Sequence)
		}
	}
	return b.String()
}

// AllSites is every site of the lab, open then blocked.
func (l *ScoreLab) AllSites() []string { return append(slices.Clone(l.Open), l.Blocked...) }

// WaitProbed waits until switchyard's API at api reports a TCP (IPv4)
// probe latency for every node of nodes (GET /switchyard/v1/nodes/{node}),
// or until within has passed: the health engine has measured them, which
// URLTest ranks by and Score takes as its probe baseline.
func WaitProbed(api string, nodes []string, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		all, why := true, ""
		for _, n := range nodes {
			if _, err := ProbeLatency(api, n); err != nil {
				all, why = false, n+": "+err.Error()
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("nodes %v not probed after %v: %s", nodes, within, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scoreCounters reads every Score group's reason counters and
// candidate counters at api, keyed "group/network/counter".
func scoreCounters(api string) (map[string]int64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/switchyard/v1/stats/score")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Groups []map[string]json.RawMessage `json:"groups"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, g := range body.Groups {
		var name, network string
		json.Unmarshal(g["group"], &name)
		json.Unmarshal(g["network"], &network)
		var reasons map[string]int64
		json.Unmarshal(g["reasons"], &reasons)
		for k, v := range reasons {
			m[name+"/"+network+"/"+k] = v
		}
		for k, raw := range g {
			var v int64
			if json.Unmarshal(raw, &v) == nil {
				m[name+"/"+network+"/"+k] = v
			}
		}
	}
	return m, nil
}

// movedCounters names the counters of now that moved since before, with
// their increase: "incumbentHeld" or "budgetBlocked+2,periodicExplore".
func movedCounters(before, now map[string]int64) string {
	var moved []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		d := now[k] - before[k]
		if d <= 0 {
			continue
		}
		name := k[strings.LastIndexByte(k, '/')+1:]
		if d > 1 {
			name += fmt.Sprintf("+%d", d)
		}
		moved = append(moved, name)
	}
	return strings.Join(moved, ",")
}

// ProbeLatency is node's latest TCP (IPv4) probe latency as switchyard's
// API at api reports it (GET /switchyard/v1/nodes/{node}).
func ProbeLatency(api, node string) (time.Duration, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/switchyard/v1/nodes/" + node)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, errors.New(resp.Status)
	}
	var body struct {
		States map[string]map[string]struct {
			LatencyMS *float64 `json:"latency_ms"`
		} `json:"states"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	ms := body.States["tcp"]["ipv4"].LatencyMS
	if ms == nil {
		return 0, errors.New("no TCP latency yet")
	}
	return time.Duration(*ms * float64(time.Millisecond)), nil
}

// ScoreReasons is one line per Score group and network with flows from
// switchyard's Score statistics at api: the non-zero reason and candidate
// counters and the trials, for a run's report.
func ScoreReasons(api string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/switchyard/v1/stats/score")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Groups []struct {
			Group   string           `json:"group"`
			Network string           `json:"network"`
			Reasons map[string]int64 `json:"reasons"`
			Budget  struct {
				Originals int64            `json:"originals"`
				Trials    map[string]int64 `json:"trials"`
			} `json:"budget"`
		} `json:"groups"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return "", fmt.Errorf("GET /switchyard/v1/stats/score: %s: %w", resp.Status, err)
	}
	var all struct {
		Groups []map[string]any `json:"groups"`
	}
	json.Unmarshal(raw, &all)
	var b strings.Builder
	for i, g := range body.Groups {
		if g.Budget.Originals == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s %s: %d flows ranked;", g.Group, g.Network, g.Budget.Originals)
		for _, k := range slices.Sorted(maps.Keys(g.Reasons)) {
			if v := g.Reasons[k]; v > 0 {
				fmt.Fprintf(&b, " %s %d", k, v)
			}
		}
		if i < len(all.Groups) {
			for _, k := range slices.Sorted(maps.Keys(all.Groups[i])) {
				if v, ok := all.Groups[i][k].(float64); ok && v > 0 {
					fmt.Fprintf(&b, ", %s %.0f", k, v)
				}
			}
		}
		b.WriteString("; trials:")
		for _, k := range slices.Sorted(maps.Keys(g.Budget.Trials)) {
			fmt.Fprintf(&b, " %s %d", k, g.Budget.Trials[k])
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}
