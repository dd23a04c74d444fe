// Command score runs the Score end-to-end scenario of test/netem as a
// benchmark and writes its figures: two real Xray servers as the nodes of
// one group, node A on a short path (loopback) whose routing blackholes
// some sites, node B over a delayed link (netlab: a namespace made for the
// run, -delay each way) serving every site; the same flows (a new
// connection to switchyard's mixed inbound and a GET, one per site and
// round) through the group as urltest and as score. Per site and policy:
// the success rate, the median time to the first byte, and which node
// carried the flows (read from the sites' record of each request's
// source, not from timing).
//
// Usage:
//
//	score -xray PATH -switchyard PATH -work DIR [-out FILE] [flags]
//
// Every flag has an environment default (BENCH_*), see -help. It needs
// root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"switchyard/bench/internal/benchkit"
	"switchyard/test/netem/netlab"
)

type config struct {
	xray, switchyard string
	work, out        string
	policies         []string
	lead, rounds     int
	delay            time.Duration
	open, blocked    int
	flowTimeout      time.Duration
	checkInterval    time.Duration
	gap              time.Duration
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	var (
		c        config
		policies string
		quick    bool
	)
	fs.StringVar(&c.xray, "xray", os.Getenv("BENCH_XRAY"), "Xray binary: both servers (env BENCH_XRAY)")
	fs.StringVar(&c.switchyard, "switchyard", os.Getenv("BENCH_SWITCHYARD"), "switchyard binary (env BENCH_SWITCHYARD)")
	fs.StringVar(&c.work, "work", os.Getenv("BENCH_WORK"), "folder for the configs and logs (env BENCH_WORK; default a new temporary one)")
	fs.StringVar(&c.out, "out", os.Getenv("BENCH_OUT"), "also write the report to this file (env BENCH_OUT)")
	fs.StringVar(&policies, "policies", benchkit.EnvString("BENCH_POLICIES", "urltest,score"), "the group's policies, one run each, in order (env BENCH_POLICIES)")
	fs.IntVar(&c.lead, "lead", benchkit.EnvInt("BENCH_LEAD", 0), "rounds to the open sites only, before the rounds to every site: a history of A serving them (env BENCH_LEAD; default none, a cold start)")
	fs.IntVar(&c.rounds, "rounds", benchkit.EnvInt("BENCH_ROUNDS", 20), "rounds of flows per policy: one new flow to every site each (env BENCH_ROUNDS)")
	fs.DurationVar(&c.delay, "delay", benchkit.EnvDuration("BENCH_DELAY", 50*time.Millisecond), "node B's link delay, each way (env BENCH_DELAY)")
	fs.IntVar(&c.open, "open", benchkit.EnvInt("BENCH_OPEN", 4), "sites both nodes serve (env BENCH_OPEN)")
	fs.IntVar(&c.blocked, "blocked", benchkit.EnvInt("BENCH_BLOCKED", 2), "sites node A blackholes (env BENCH_BLOCKED)")
	fs.DurationVar(&c.flowTimeout, "flow-timeout", benchkit.EnvDuration("BENCH_FLOW_TIMEOUT", 10*time.Second), "a flow's bound (env BENCH_FLOW_TIMEOUT)")
	fs.DurationVar(&c.checkInterval, "check-interval", benchkit.EnvDuration("BENCH_CHECK_INTERVAL", 10*time.Second), "switchyard's [health] check_interval (env BENCH_CHECK_INTERVAL)")
	fs.DurationVar(&c.gap, "gap", benchkit.EnvDuration("BENCH_GAP", 0), "pause between two flows (env BENCH_GAP)")
	fs.BoolVar(&quick, "quick", os.Getenv("BENCH_QUICK") != "", "smoke run: 8 rounds (flags given explicitly still win) (env BENCH_QUICK)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			c.rounds = 8
		}
	}
	for _, p := range strings.Split(policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.policies = append(c.policies, p)
		}
	}
	switch {
	case c.xray == "" || c.switchyard == "":
		return nil, errors.New("-xray and -switchyard are required")
	case c.rounds < 1 || c.lead < 0:
		return nil, errors.New("-rounds must be at least 1 and -lead not negative")
	case c.open < 1 || c.blocked < 1:
		return nil, errors.New("-open and -blocked must be at least 1")
	case c.delay < 0:
		return nil, errors.New("-delay must not be negative")
	case len(c.policies) == 0:
		return nil, errors.New("-policies names none")
	}
	return &c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "score:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "score:", err)
		os.Exit(1)
	}
}

func run(c *config) (err error) {
	if c.work == "" {
		if c.work, err = os.MkdirTemp("", "switchyard-bench-score"); err != nil {
			return err
		}
	}
	lab, err := netlab.NewScoreLab(netlab.ScoreLabConfig{Xray: c.xray, Dir: c.work, Delay: c.delay, Open: c.open, Blocked: c.blocked})
	if err != nil {
		return err
	}
	defer lab.Close()
	stopOnSignal(lab)
	var report strings.Builder
	fmt.Fprintf(&report, "link to node B: %s; %v each way, RTT %v\n", lab.Path.Mode, c.delay, lab.Path.RTT())
	fmt.Fprintf(&report, "node A: Xray (VLESS over TLS) at %s on loopback, blackholes %s\n", lab.NodeA, strings.Join(lab.Blocked, ", "))
	fmt.Fprintf(&report, "node B: Xray (VLESS over TLS) at %s in namespace %s, serves every site\n", lab.NodeB, lab.Path.NS)
	fmt.Fprintf(&report, "flows: per policy %d rounds to the %d open sites, then %d rounds to all %d sites; one new flow (SOCKS5 CONNECT, GET) per site and round\n\n", c.lead, c.open, c.rounds, c.open+c.blocked)
	fmt.Print(report.String())

	var (
		runs    []*netlab.LabRun
		reasons strings.Builder
	)
	for _, policy := range c.policies {
		fmt.Fprintf(os.Stderr, "measuring %s\n", policy)
		r, why, err := runPolicy(c, lab, policy)
		if err != nil {
			return fmt.Errorf("%s: %w", policy, err)
		}
		runs = append(runs, r)
		if why != "" {
			fmt.Fprintf(&reasons, "%s, the Score statistics after the flows (/switchyard/v1/stats/score):\n%s", policy, why)
		}
	}
	table := "success rate and median time to the first byte per site (TTFB: from the connection to the proxy to the first response byte)\n" +
		netlab.LabTable(lab.AllSites(), runs...) + "\n" + totals(lab, runs) + "\n" + reasons.String()
	fmt.Print(table)
	report.WriteString(table)
	if c.out != "" {
		if err := os.MkdirAll(filepath.Dir(c.out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.out, []byte(report.String()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "report written to %s\n", c.out)
	}
	return nil
}

// runPolicy runs switchyard with the lab's group under policy, waits until
// both nodes are probed and drives the flows. It returns them and, for a
// Score group, the engine's reason and trial counters after them.
func runPolicy(c *config, lab *netlab.ScoreLab, policy string) (*netlab.LabRun, string, error) {
	port, err := benchkit.FreePort()
	if err != nil {
		return nil, "", err
	}
	apiPort, err := benchkit.FreePort()
	if err != nil {
		return nil, "", err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	api := fmt.Sprintf("127.0.0.1:%d", apiPort)
	cfg := filepath.Join(c.work, "switchyard-"+policy+".toml")
	if err := os.WriteFile(cfg, []byte(lab.SwitchyardConfig(policy, listen, apiPort, c.checkInterval)), 0o600); err != nil {
		return nil, "", err
	}
	if out, err := exec.Command(c.switchyard, "check", "-c", cfg).CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("switchyard check refuses the config: %v\n%s", err, out)
	}
	p, err := benchkit.StartProc("switchyard "+policy, filepath.Join(c.work, "switchyard-"+policy+".log"), exec.Command(c.switchyard, "run", "-c", cfg))
	if err != nil {
		return nil, "", err
	}
	running.Lock()
	running.p = p
	running.Unlock()
	defer func() {
		running.Lock()
		running.p = nil
		running.Unlock()
		p.Stop()
	}()
	if err := p.WaitListening(listen, 20*time.Second); err != nil {
		return nil, "", err
	}
	if err := netlab.WaitProbed(api, []string{netlab.OutboundA, netlab.OutboundB}, 30*time.Second); err != nil {
		return nil, "", err
	}
	run := lab.Drive(policy, "bench-"+policy, listen, api, c.lead, c.rounds, c.flowTimeout, c.gap)
	why := ""
	if policy == "score" {
		if why, err = netlab.ScoreReasons(api); err != nil {
			return nil, "", err
		}
	}
	return run, why, nil
}

// running is the switchyard the harness runs now, for stopOnSignal.
var running struct {
	sync.Mutex
	p *benchkit.Proc
}

// stopOnSignal takes everything down on SIGINT or SIGTERM before the
// harness exits: the switchyard it runs, the servers, the sites and the
// namespace (which would otherwise outlive it).
func stopOnSignal(lab *netlab.ScoreLab) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "score: %v: stopping\n", s)
		running.Lock()
		if running.p != nil {
			running.p.Stop()
		}
		running.Unlock()
		lab.Close()
		os.Exit(1)
	}()
}

// totals is each run's success rate over the open and the blocked sites,
// and how many flows each node carried.
func totals(lab *netlab.ScoreLab, runs []*netlab.LabRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-9s %6s %6s %6s %6s\n", "policy", "sites", "flows", "ok", "via A", "via B")
	for _, r := range runs {
		for _, blocked := range []bool{false, true} {
			var flows, ok, a, bb int
			for _, s := range r.Summary(lab.AllSites()) {
				if s.Blocked != blocked {
					continue
				}
				flows, ok, a, bb = flows+s.Flows, ok+s.OK, a+s.ViaA, bb+s.ViaB
			}
			kind := "served"
			if blocked {
				kind = "blocked"
			}
			fmt.Fprintf(&b, "%-8s %-9s %6d %5.0f%% %6d %6d\n", r.Policy, kind, flows, 100*float64(ok)/float64(max(flows, 1)), a, bb)
		}
	}
	return b.String()
}
