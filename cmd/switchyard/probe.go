package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"switchyard/config"
	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/spec"
	"switchyard/supervisor"
)

// probeMargin is what the default --timeout adds to [health] check_timeout:
// the time to prepare the outbounds and to close them.
const probeMargin = 2 * time.Second

const probeHelp = `Run one probe cycle of the nodes the TAGs name, as a running switchyard
probes them (through each node's own outbound), and print their health and
each group's pick. No inbound is bound and nothing runs after the cycle.

A TAG is an outbound (probed even when no group holds it), a balancer (its
members) or a group (every leaf it reaches, finals included, and the
members of the balancers it reaches). Without a TAG: every group, and every
leaf they reach; every outbound when there is no group. Block outbounds are
never probed. The configuration is loaded and validated as check does.

The TCP probe is [health] tcp_check_url through the node (a raw TCP connect
to the node's server when it is []); the UDP probe, one DNS query to the
first udp_check_dns server through each node that carries UDP.

Output: one row per node, in configuration order:
  NODE                   the outbound's tag
  TCP4 TCP6              the TCP probe's outcome per address family
  DNS4 DNS6 DATA4 DATA6  the UDP probe's outcome (it covers both UDP domains)
                         alive: answered; dead: failed; -: not observed
  RTT                    the TCP round trip, IPv4's, else IPv6's; - for none
  ERROR                  the error of a failed probe
then two lines per group, its selection over IPv4:
  group TAG (POLICY): tcp → LEAF via GROUP > ... > LEAF — WHY
  group TAG (POLICY): udp → LEAF via GROUP > ... > LEAF — WHY
each line of a Score group followed by its evidence summary (the readonly
aggregate read of that network over IPv4):
    score: selected MEMBER, provisional|qualified, observed usable|not
      observed usable; question Q (wait W); next flow MEMBER (Q)|none;
      last reason R
    member MEMBER: question Q, wait W       (one per challenger, in
                                            dispatch order)
    relation MEMBER: equivalent|faster (selection|challenger), BASIS,
      SEL vs CH, expires HH:MM:SS
The groups read this cycle's outcome: a state whose probe failed in it is
dead to them (a running switchyard waits for 3 failures in a row).

--json prints one JSON object instead; its fields are stable:
  nodes[]: name, answered (the TCP probe answered), latency_ms (as RTT; null
    for none), tcp_error, udp_error ("" for none), udp_probed, and
    states.{tcp,dns_udp,data_udp}.{ipv4,ipv6}: observed, alive (an
    unobserved state is alive), latency_ms, history[] (this cycle's
    probes: time, ok, delay_ms)
  groups[]: tag, policy, and tcp and udp: family ("ipv4"), leaf, winner,
    chain[], final, reason, sentence, candidates[] (member, kind, leaf,
    eligible, excluded, why, latency_ms, measured, strikes)
  reason: chosen, default, first_member, lowest_average, within_tolerance,
    unmeasured, pinned, round_robin, ipv4_path, final, last_resort, refused
  excluded: "" (eligible), dead, no_udp, udp_dead, check_url_dead,
    cut_cycle, too_deep, cycle, no_pick, not_chosen
  score (Score groups only): selected, provisional, observed_usable,
    question, wait_reason, next_business_flow (null, or member and
    question), members[] (member, question, wait_reason), relations[]
    (member, relation, faster, basis, selection_ms, challenger_ms,
    expires_at), last_reason
  question: recovery, availability, pair, qualification, none;
    wait_reason: none, budget, inFlight, comparableTraffic, backoff;
    basis: targetResponse, commonTargets, probeCohort

Exit status: 0 when every probed node answered its TCP probe; 1 when the
configuration is invalid or a TAG names nothing to probe; 2 when a node did
not answer (the timeout ending the cycle first included).`

func probeCmd() *cobra.Command {
	var (
		path    string
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "probe -c FILE [TAG...]",
		Short: "Probe nodes or groups once and print their health and the groups' picks",
		Long:  probeHelp,
		RunE: func(cmd *cobra.Command, tags []string) error {
			stderr := cmd.ErrOrStderr()
			if path == "" {
				fmt.Fprintln(stderr, `switchyard probe: required flag "config" (-c FILE) not set`)
				return exitError{1}
			}
			s, err := loadChecked(stderr, path)
			if err != nil {
				return err
			}
			if timeout <= 0 {
				timeout = s.Health.CheckTimeout
				if timeout <= 0 {
					timeout = health.DefaultCheckTimeout
				}
				timeout += probeMargin
			}
			parent := cmd.Context()
			if parent == nil {
				parent = context.Background()
			}
			ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			rep, err := supervisor.Probe(ctx, s, tags, probeLogger(s.Log, stderr))
			if err != nil {
				if errors.Is(err, supervisor.ErrUnknownTag) || errors.Is(err, supervisor.ErrBlockTag) {
					fmt.Fprintln(stderr, "switchyard probe:", err)
				} else {
					fmt.Fprintf(stderr, "%s: %v\n", path, err)
				}
				return exitError{1}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				err = writeProbeJSON(out, rep)
			} else {
				err = writeProbeText(out, rep)
			}
			if err != nil {
				return err
			}
			for _, n := range rep.Nodes {
				if !n.Answered() {
					return exitError{2}
				}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(c.ErrOrStderr(), "switchyard probe:", err)
		return exitError{1}
	})
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file (TOML)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (fields above) instead of the table")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "bound of the whole cycle (default [health] check_timeout + 2s)")
	return cmd
}

// loadChecked loads and validates path as check does, printing what check
// prints to w; a failure is exit status 1.
func loadChecked(w io.Writer, path string) (*spec.Spec, error) {
	s, warns, err := config.Load(path)
	if err != nil {
		var errs config.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(w, e)
			}
		} else {
			fmt.Fprintln(w, err)
		}
		return nil, exitError{1}
	}
	for _, warn := range warns {
		fmt.Fprintln(w, "warning: "+warn.Error())
	}
	if err := supervisor.Check(s); err != nil {
		fmt.Fprintf(w, "%s: %v\n", path, err)
		return nil, exitError{1}
	}
	return s, nil
}

// probeLogger logs warnings and errors to w, or everything at [log] level
// debug or trace: the info records of a probe would drown its output.
func probeLogger(l spec.Log, w io.Writer) *slog.Logger {
	if l.Level != "debug" && l.Level != "trace" {
		l.Level = "warn"
	}
	return newLogger(l, w)
}

var probeCells = [...]struct {
	d health.Domain
	f netx.Family
}{
	{health.TCP, netx.V4}, {health.TCP, netx.V6},
	{health.DNSUDP, netx.V4}, {health.DNSUDP, netx.V6},
	{health.DataUDP, netx.V4}, {health.DataUDP, netx.V6},
}

func writeProbeText(w io.Writer, rep *supervisor.ProbeReport) error {
	var b strings.Builder
	if len(rep.Nodes) == 0 {
		b.WriteString("no node to probe\n")
	} else {
		var table strings.Builder
		tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tTCP4\tTCP6\tDNS4\tDNS6\tDATA4\tDATA6\tRTT\tERROR")
		for _, n := range rep.Nodes {
			fmt.Fprint(tw, n.Name)
			for _, c := range probeCells {
				fmt.Fprint(tw, "\t", stateWord(n, c.d, c.f))
			}
			rtt := "-"
			if d, ok := n.RTT(); ok {
				rtt = shortDuration(d)
			}
			fmt.Fprintf(tw, "\t%s\t%s\n", rtt, probeErrors(n))
		}
		tw.Flush()
		for line := range strings.Lines(table.String()) {
			// Without the padding of an empty ERROR cell.
			b.WriteString(strings.TrimRight(line, " \n"))
			b.WriteString("\n")
		}
	}
	if len(rep.Groups) > 0 {
		b.WriteString("\n")
	}
	for _, g := range rep.Groups {
		for _, nw := range [...]netx.Network{netx.TCP, netx.UDP} {
			x, chain := g.Explain[nw], g.Chain[nw]
			to := x.Leaf
			if to == "" && len(chain) > 0 {
				to = chain[len(chain)-1] // a balancer picks per flow
			}
			fmt.Fprintf(&b, "group %s (%s): %s → ", g.Tag, g.Policy, nw)
			if to == "" {
				b.WriteString("none")
			} else {
				fmt.Fprintf(&b, "%s via %s", to, strings.Join(chain, " > "))
			}
			fmt.Fprintf(&b, " — %s\n", x.Sentence)
			if x.Score != nil {
				writeScoreText(&b, x.Score)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeScoreText is a Score group's evidence summary under its line.
func writeScoreText(b *strings.Builder, x *group.ScoreExplanation) {
	sel, qual, usable := x.Selected, "qualified", "observed usable"
	if sel == "" {
		sel = "none"
	}
	if x.Provisional {
		qual = "provisional"
	}
	if !x.ObservedUsable {
		usable = "not observed usable"
	}
	next := "none"
	if n := x.NextBusinessFlow; n != nil {
		next = fmt.Sprintf("%s (%s)", n.Member, n.Question)
	}
	last := x.LastReason
	if last == "" {
		last = "none"
	}
	fmt.Fprintf(b, "    score: selected %s, %s, %s; question %s (wait %s); next flow %s; last reason %s\n",
		sel, qual, usable, x.Question, x.WaitReason, next, last)
	for _, m := range x.Members {
		fmt.Fprintf(b, "    member %s: question %s, wait %s\n", m.Member, m.Question, m.WaitReason)
	}
	for _, r := range x.Relations {
		rel := r.Relation
		if r.Faster != "" {
			rel += " (" + r.Faster + ")"
		}
		fmt.Fprintf(b, "    relation %s: %s, %s, %s vs %s, expires %s\n", r.Member, rel, r.Basis,
			shortDuration(msDuration(r.SelectionMs)), shortDuration(msDuration(r.ChallengerMs)), r.ExpiresAt.Local().Format("15:04:05"))
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func stateWord(n supervisor.ProbeNode, d health.Domain, f netx.Family) string {
	switch obs, ok := n.Verdict(d, f); {
	case !obs:
		return "-"
	case ok:
		return "alive"
	}
	return "dead"
}

// probeErrors is the ERROR cell: the TCP probe's error, then the UDP
// probe's.
func probeErrors(n supervisor.ProbeNode) string {
	var parts []string
	if n.TCPErr != nil {
		parts = append(parts, n.TCPErr.Error())
	}
	if n.UDPErr != nil {
		parts = append(parts, "udp: "+n.UDPErr.Error())
	}
	return strings.Join(parts, "; ")
}

// shortDuration is an RTT for people: whole milliseconds, or microseconds
// below one.
func shortDuration(d time.Duration) string {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// The --json shape; the field names are documented in probeHelp.
type (
	probeJSON struct {
		Nodes  []probeNodeJSON  `json:"nodes"`
		Groups []probeGroupJSON `json:"groups"`
	}
	probeNodeJSON struct {
		Name      string   `json:"name"`
		Answered  bool     `json:"answered"`
		LatencyMS *float64 `json:"latency_ms"`
		TCPError  string   `json:"tcp_error"`
		UDPError  string   `json:"udp_error"`
		UDPProbed bool     `json:"udp_probed"`
		States    struct {
			TCP     probeFamiliesJSON `json:"tcp"`
			DNSUDP  probeFamiliesJSON `json:"dns_udp"`
			DataUDP probeFamiliesJSON `json:"data_udp"`
		} `json:"states"`
	}
	probeFamiliesJSON struct {
		IPv4 probeStateJSON `json:"ipv4"`
		IPv6 probeStateJSON `json:"ipv6"`
	}
	probeStateJSON struct {
		Observed  bool              `json:"observed"`
		Alive     bool              `json:"alive"`
		LatencyMS *float64          `json:"latency_ms"`
		History   []probeSampleJSON `json:"history"`
	}
	probeSampleJSON struct {
		Time    time.Time `json:"time"`
		OK      bool      `json:"ok"`
		DelayMS float64   `json:"delay_ms"`
	}
	probeGroupJSON struct {
		Tag    string             `json:"tag"`
		Policy string             `json:"policy"`
		TCP    probeSelectionJSON `json:"tcp"`
		UDP    probeSelectionJSON `json:"udp"`
	}
	probeSelectionJSON struct {
		Family     string               `json:"family"`
		Leaf       string               `json:"leaf"`
		Winner     string               `json:"winner"`
		Chain      []string             `json:"chain"`
		Final      string               `json:"final"`
		Reason     string               `json:"reason"`
		Sentence   string               `json:"sentence"`
		Candidates []probeCandidateJSON `json:"candidates"`
		Score      *probeScoreJSON      `json:"score,omitempty"`
	}
	probeScoreJSON struct {
		Selected         string              `json:"selected"`
		Provisional      bool                `json:"provisional"`
		ObservedUsable   bool                `json:"observed_usable"`
		Question         string              `json:"question"`
		WaitReason       string              `json:"wait_reason"`
		NextBusinessFlow *probeNextFlowJSON  `json:"next_business_flow"`
		Members          []probeMemberJSON   `json:"members"`
		Relations        []probeRelationJSON `json:"relations"`
		LastReason       string              `json:"last_reason"`
	}
	probeNextFlowJSON struct {
		Member   string `json:"member"`
		Question string `json:"question"`
	}
	probeMemberJSON struct {
		Member     string `json:"member"`
		Question   string `json:"question"`
		WaitReason string `json:"wait_reason"`
	}
	probeRelationJSON struct {
		Member       string    `json:"member"`
		Relation     string    `json:"relation"`
		Faster       string    `json:"faster"`
		Basis        string    `json:"basis"`
		SelectionMS  float64   `json:"selection_ms"`
		ChallengerMS float64   `json:"challenger_ms"`
		ExpiresAt    time.Time `json:"expires_at"`
	}
	probeCandidateJSON struct {
		Member    string   `json:"member"`
		Kind      string   `json:"kind"`
		Leaf      string   `json:"leaf"`
		Eligible  bool     `json:"eligible"`
		Excluded  string   `json:"excluded"`
		Why       string   `json:"why"`
		LatencyMS *float64 `json:"latency_ms"`
		Measured  bool     `json:"measured"`
		Strikes   int      `json:"strikes"`
	}
)

func writeProbeJSON(w io.Writer, rep *supervisor.ProbeReport) error {
	out := probeJSON{Nodes: []probeNodeJSON{}, Groups: []probeGroupJSON{}}
	for _, n := range rep.Nodes {
		j := probeNodeJSON{Name: n.Name, Answered: n.Answered(), UDPProbed: n.UDPProbed}
		if d, ok := n.RTT(); ok {
			j.LatencyMS = millis(d)
		}
		if n.TCPErr != nil {
			j.TCPError = n.TCPErr.Error()
		}
		if n.UDPErr != nil {
			j.UDPError = n.UDPErr.Error()
		}
		for d, fams := range map[health.Domain]*probeFamiliesJSON{health.TCP: &j.States.TCP, health.DNSUDP: &j.States.DNSUDP, health.DataUDP: &j.States.DataUDP} {
			fams.IPv4 = stateJSON(n, d, netx.V4)
			fams.IPv6 = stateJSON(n, d, netx.V6)
		}
		out.Nodes = append(out.Nodes, j)
	}
	for _, g := range rep.Groups {
		out.Groups = append(out.Groups, probeGroupJSON{
			Tag:    g.Tag,
			Policy: g.Policy,
			TCP:    selectionJSON(g.Explain[netx.TCP], g.Chain[netx.TCP]),
			UDP:    selectionJSON(g.Explain[netx.UDP], g.Chain[netx.UDP]),
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func stateJSON(n supervisor.ProbeNode, d health.Domain, f netx.Family) probeStateJSON {
	s := n.State.Of(d, f)
	obs, ok := n.Verdict(d, f)
	j := probeStateJSON{Observed: obs, Alive: ok || !obs, History: []probeSampleJSON{}}
	if s.HasLatency {
		j.LatencyMS = millis(s.Latency)
	}
	for _, x := range s.Display() {
		j.History = append(j.History, probeSampleJSON{Time: x.Time, OK: x.Delay > 0, DelayMS: *millis(x.Delay)})
	}
	return j
}

func selectionJSON(x group.Explanation, chain []string) probeSelectionJSON {
	j := probeSelectionJSON{
		Family:     "ipv4",
		Leaf:       x.Leaf,
		Winner:     x.Winner,
		Chain:      append([]string{}, chain...),
		Final:      x.Final,
		Reason:     string(x.Reason),
		Sentence:   x.Sentence,
		Candidates: []probeCandidateJSON{},
	}
	for _, c := range x.Candidates {
		cj := probeCandidateJSON{Member: c.Member, Kind: c.Kind, Leaf: c.Leaf, Eligible: c.Eligible,
			Excluded: string(c.Excluded), Why: c.Why, Measured: c.Measured, Strikes: c.Strikes}
		if c.Measured {
			cj.LatencyMS = millis(c.Latency)
		}
		j.Candidates = append(j.Candidates, cj)
	}
	if x.Score != nil {
		j.Score = scoreJSON(x.Score)
	}
	return j
}

func scoreJSON(x *group.ScoreExplanation) *probeScoreJSON {
	j := &probeScoreJSON{Selected: x.Selected, Provisional: x.Provisional, ObservedUsable: x.ObservedUsable, Question: x.Question,
		WaitReason: x.WaitReason, LastReason: x.LastReason, Members: []probeMemberJSON{}, Relations: []probeRelationJSON{}}
	if n := x.NextBusinessFlow; n != nil {
		j.NextBusinessFlow = &probeNextFlowJSON{Member: n.Member, Question: n.Question}
	}
	for _, m := range x.Members {
		j.Members = append(j.Members, probeMemberJSON{Member: m.Member, Question: m.Question, WaitReason: m.WaitReason})
	}
	for _, r := range x.Relations {
		j.Relations = append(j.Relations, probeRelationJSON{Member: r.Member, Relation: r.Relation, Faster: r.Faster, Basis: r.Basis,
			SelectionMS: r.SelectionMs, ChallengerMS: r.ChallengerMs, ExpiresAt: r.ExpiresAt})
	}
	return j
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) *float64 {
	ms := float64(d.Microseconds()) / 1000
	return &ms
}
