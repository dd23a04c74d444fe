// Command failover measures how routers' urltest groups leave an upstream
// that dies: for each router (switchyard, sing-box) and each trial it
// starts two upstream SOCKS5 servers (Xray processes "a" and "b", each
// sending from its own loopback address), a router with a urltest group
// over them, and one client that sends a short flow through the router
// every -pace. Once the router has measured both upstreams and the flows
// have run a while, it SIGKILLs the upstream that carried the last flow and
// counts the flows that fail and the time until flows succeed through the
// other upstream and keep succeeding; then it restarts the killed upstream,
// waits until the router has probed it again, and counts how many of the
// next -flap flows go back to it.
//
// Usage:
//
//	failover -xray PATH -switchyard PATH -singbox PATH -work DIR [flags]
//
// Every flag has an environment default (BENCH_*), see -help.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"switchyard/bench/internal/benchkit"
	"time"
)

type config struct {
	xray, switchyard, singbox string
	work                      string
	routers                   []string
	trials                    int
	pace                      time.Duration
	steady                    time.Duration
	flap                      int
	interval                  time.Duration // 0: each router's default
	probeDelay                time.Duration
	flowTimeout               time.Duration
	seed                      uint64
	switchyardLog             string
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	var (
		c       config
		routers string
		quick   bool
	)
	fs.StringVar(&c.xray, "xray", os.Getenv("BENCH_XRAY"), "Xray binary, the upstreams (env BENCH_XRAY)")
	fs.StringVar(&c.switchyard, "switchyard", os.Getenv("BENCH_SWITCHYARD"), "switchyard binary (env BENCH_SWITCHYARD)")
	fs.StringVar(&c.singbox, "singbox", os.Getenv("BENCH_SINGBOX"), "sing-box binary (env BENCH_SINGBOX)")
	fs.StringVar(&c.work, "work", os.Getenv("BENCH_WORK"), "folder for the configs and logs (env BENCH_WORK; default a new temporary one)")
	fs.StringVar(&routers, "routers", benchkit.EnvString("BENCH_ROUTERS", "switchyard,sing-box"), "routers to measure, in order (env BENCH_ROUTERS)")
	fs.IntVar(&c.trials, "trials", benchkit.EnvInt("BENCH_TRIALS", 5), "trials per router (env BENCH_TRIALS)")
	fs.DurationVar(&c.pace, "pace", benchkit.EnvDuration("BENCH_PACE", 50*time.Millisecond), "one client flow starts every pace, or when the one before ends if later (env BENCH_PACE)")
	fs.DurationVar(&c.steady, "steady", benchkit.EnvDuration("BENCH_STEADY", 3*time.Second), "flows before the kill (plus a random part of the check interval), and how long flows must keep succeeding for the router to count as recovered (env BENCH_STEADY)")
	fs.IntVar(&c.flap, "flap", benchkit.EnvInt("BENCH_FLAP", 100), "flows counted after the restarted upstream is measured again (env BENCH_FLAP)")
	fs.DurationVar(&c.interval, "interval", benchkit.EnvDuration("BENCH_INTERVAL", 0), "check interval of both routers' groups (env BENCH_INTERVAL; 0: each router's default, switchyard 30s, sing-box 3m)")
	fs.DurationVar(&c.probeDelay, "probe-delay", benchkit.EnvDuration("BENCH_PROBE_DELAY", 10*time.Millisecond), "the probe URL answers after this long, so a probe measures a delay above 0 ms (env BENCH_PROBE_DELAY)")
	fs.DurationVar(&c.flowTimeout, "flow-timeout", benchkit.EnvDuration("BENCH_FLOW_TIMEOUT", 10*time.Second), "a client flow not done in this long fails (env BENCH_FLOW_TIMEOUT)")
	fs.Uint64Var(&c.seed, "seed", uint64(benchkit.EnvInt("BENCH_SEED", 0)), "seed of the random part of the time before each kill (env BENCH_SEED; 0: from the clock)")
	fs.StringVar(&c.switchyardLog, "switchyard-log", benchkit.EnvString("BENCH_SWITCHYARD_LOG", "info"), "switchyard's [log] level (debug shows its retries and strikes) (env BENCH_SWITCHYARD_LOG)")
	fs.BoolVar(&quick, "quick", os.Getenv("BENCH_QUICK") != "", "smoke run: 1 trial, 10s check interval for both, 2s steady, 40 flap flows (flags given explicitly still win) (env BENCH_QUICK)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, q := range []struct {
			flag, env string
			apply     func()
		}{
			{"trials", "BENCH_TRIALS", func() { c.trials = 1 }},
			{"interval", "BENCH_INTERVAL", func() { c.interval = 10 * time.Second }},
			{"steady", "BENCH_STEADY", func() { c.steady = 2 * time.Second }},
			{"flap", "BENCH_FLAP", func() { c.flap = 40 }},
		} {
			if !set[q.flag] && os.Getenv(q.env) == "" {
				q.apply()
			}
		}
	}
	for r := range strings.SplitSeq(routers, ",") {
		r = strings.TrimSpace(r)
		switch r {
		case "switchyard", "sing-box":
			c.routers = append(c.routers, r)
		case "":
		default:
			return nil, fmt.Errorf("unknown router %q (want switchyard, sing-box)", r)
		}
	}
	if len(c.routers) == 0 {
		return nil, errors.New("no router to measure")
	}
	if c.xray == "" {
		return nil, errors.New("-xray is required")
	}
	if slices.Contains(c.routers, "switchyard") && c.switchyard == "" {
		return nil, errors.New("-switchyard is required")
	}
	if slices.Contains(c.routers, "sing-box") && c.singbox == "" {
		return nil, errors.New("-singbox is required")
	}
	if c.trials < 1 || c.pace <= 0 || c.steady <= 0 || c.flap < 0 || c.interval < 0 || c.probeDelay < 0 || c.flowTimeout <= 0 {
		return nil, errors.New("trials, pace, steady and flow-timeout must be positive, flap, interval and probe-delay not negative")
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return &c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

func run(c *config, w io.Writer) error {
	if c.work == "" {
		dir, err := os.MkdirTemp("", "switchyard-bench-failover.")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.work = dir
	}
	d, err := startDest(c.probeDelay)
	if err != nil {
		return err
	}
	defer d.close()
	rnd := rand.New(rand.NewPCG(c.seed, 0))
	fmt.Fprintf(w, "failover: %d trial(s) per router; a flow every %v; steady %v; %d flap flows; probe URL answers after %v; seed %d\n",
		c.trials, c.pace, c.steady, c.flap, c.probeDelay, c.seed)

	var summaries []summary
	for _, name := range c.routers {
		r := &router{name: name, interval: c.interval, setInterval: c.interval > 0, logLevel: c.switchyardLog}
		switch name {
		case "switchyard":
			r.bin, r.write = c.switchyard, writeSwitchyard
			if !r.setInterval {
				r.interval = switchyardDefaultInterval
			}
		case "sing-box":
			r.bin, r.write = c.singbox, writeSingbox
			if !r.setInterval {
				r.interval = singboxDefaultInterval
			}
		}
		s := summary{router: name, interval: r.interval, setInterval: r.setInterval}
		for i := range c.trials {
			dir := filepath.Join(c.work, fmt.Sprintf("%s-%d", name, i+1))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			res, err := runTrial(c, d, r, dir, rnd)
			if err != nil {
				return fmt.Errorf("%s trial %d: %w", name, i+1, err)
			}
			fmt.Fprintf(w, "  %-10s trial %d: %s\n", name, i+1, res)
			s.trials = append(s.trials, res)
		}
		summaries = append(summaries, s)
	}
	fmt.Fprintln(w)
	report(w, c, summaries)
	return nil
}

// flowRec is one client flow: when it started and ended, the upstream that
// carried it ("a" or "b") or its error.
type flowRec struct {
	start, end time.Time
	up         string
	err        error
}

// stream sends the client flows, one at a time: each starts pace after the
// one before started, or at once when that one took longer.
type stream struct {
	router  string
	dst     netip.AddrPort
	pace    time.Duration
	timeout time.Duration
	byIP    map[string]string
	next    time.Time
}

func (s *stream) one() flowRec {
	if d := time.Until(s.next); d > 0 {
		time.Sleep(d)
	}
	start := time.Now()
	s.next = start.Add(s.pace)
	ip, err := flow(s.router, s.dst, s.timeout)
	f := flowRec{start: start, end: time.Now(), err: err}
	if err == nil {
		if up, ok := s.byIP[ip]; ok {
			f.up = up
		} else {
			f.err = fmt.Errorf("flow came from %s, not an upstream", ip)
		}
	}
	return f
}

// recovery follows the flows after a kill: the router has recovered once
// flows succeed through the survivor for steady without a failure.
type recovery struct {
	survivor string
	steady   time.Duration
	killAt   time.Time

	flows    int    // flows since the kill
	failed   int    // of which failed
	firstErr string // the first failure's error
	// runStart is the end of the first flow of the current unbroken run of
	// successes through the survivor (zero when the last flow failed);
	// runFlow is that flow's number since the kill.
	runStart time.Time
	runFlow  int
}

// add takes the next flow and reports whether the router has recovered.
func (r *recovery) add(f flowRec) bool {
	r.flows++
	if f.err != nil || f.up != r.survivor {
		if f.err != nil {
			r.failed++
			if r.firstErr == "" {
				r.firstErr = f.err.Error()
			}
		}
		r.runStart, r.runFlow = time.Time{}, 0
		return false
	}
	if r.runStart.IsZero() {
		r.runStart, r.runFlow = f.end, r.flows
	}
	return f.end.Sub(r.runStart) >= r.steady
}

// trial is what one trial measured.
type trial struct {
	killed      string        // the upstream that served before the kill and was killed
	preFlows    int           // flows before the kill
	preSwitches int           // changes of upstream between successive flows before the kill
	preFailed   int           // flows that failed before the kill
	killAfter   time.Duration // from the first flow to the kill
	failed      int           // flows failed from the kill until recovery
	firstErr    string
	recovered   bool
	recover     time.Duration // kill to the end of the first flow of the lasting run through the survivor
	recoverFlow int           // that flow's number since the kill

	remeasured     bool
	remeasure      time.Duration // restart to the first probe answered through the restarted upstream
	waitBack       int           // flows through the restarted upstream before it was measured again
	waitFlows      int           // flows in that wait
	flapBack       int           // of the flap flows after it was measured again, those through it
	flapFlows      int
	failedRestart  int // flows that failed after the restart
	firstErrReturn string
}

func (t trial) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "served by %s (%d flows, %d switches, %d failed), killed it after %.1fs; ", t.killed, t.preFlows, t.preSwitches, t.preFailed, t.killAfter.Seconds())
	if t.recovered {
		fmt.Fprintf(&b, "%d failed flows, recovered in %s (flow %d after the kill)", t.failed, msText(t.recover), t.recoverFlow)
	} else {
		fmt.Fprintf(&b, "%d failed flows, NOT recovered", t.failed)
	}
	if t.firstErr != "" {
		fmt.Fprintf(&b, " [first error: %s]", t.firstErr)
	}
	if t.remeasured {
		fmt.Fprintf(&b, "; restarted, probed again after %.1fs (%d of %d flows back on it meanwhile); %d of %d flows back on it after",
			t.remeasure.Seconds(), t.waitBack, t.waitFlows, t.flapBack, t.flapFlows)
	} else if t.recovered {
		fmt.Fprintf(&b, "; restarted, NOT probed again within the wait (%d of %d flows back on it)", t.waitBack, t.waitFlows)
	}
	if t.failedRestart > 0 {
		fmt.Fprintf(&b, "; %d flows failed after the restart [%s]", t.failedRestart, t.firstErrReturn)
	}
	return b.String()
}

func msText(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

// runTrial runs one trial of r with fresh upstreams and a fresh router.
func runTrial(c *config, d *dest, r *router, dir string, rnd *rand.Rand) (res trial, err error) {
	ups := [2]*upstream{{name: "a", ip: "127.0.0.2"}, {name: "b", ip: "127.0.0.3"}}
	byIP := map[string]string{}
	for _, u := range ups {
		if u.port, err = freePort(); err != nil {
			return res, err
		}
		u.log = filepath.Join(dir, "xray-"+u.name+".log")
		if err := writeXray(dir, u); err != nil {
			return res, err
		}
		if err := u.start(c.xray); err != nil {
			return res, err
		}
		defer func() { u.p.stop() }()
		byIP[u.ip] = u.name
	}
	port, err := freePort()
	if err != nil {
		return res, err
	}
	probeURL := "http://" + d.addr() + "/generate_204"
	args, err := r.write(r, dir, port, ups, probeURL)
	if err != nil {
		return res, err
	}
	started := time.Now()
	rp, err := startProc(r.name, filepath.Join(dir, r.name+".log"), r.bin, args...)
	if err != nil {
		return res, err
	}
	defer rp.stop()
	if err := rp.waitListening(loopback(port), 10*time.Second); err != nil {
		return res, err
	}

	// Both upstreams measured: a probe of each answered, and a moment for
	// the router to record it.
	for _, u := range ups {
		for {
			if _, ok := d.probedSince(u.ip, started); ok {
				break
			}
			if time.Since(started) > 30*time.Second {
				return res, fmt.Errorf("%s never probed upstream %s (log: %s)", r.name, u.name, rp.log)
			}
			if !rp.alive() {
				return res, fmt.Errorf("%s exited (log: %s)", r.name, rp.log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(500 * time.Millisecond)

	dst := netip.MustParseAddrPort(d.addr())
	s := &stream{router: loopback(port), dst: dst, pace: c.pace, timeout: c.flowTimeout, byIP: byIP}

	// Flows before the kill: steady, plus a random part of the check
	// interval, so the kill lands anywhere in the router's check cycle.
	pre := c.steady + time.Duration(rnd.Int64N(int64(r.interval)))
	first := time.Now()
	last := ""
	for time.Since(first) < pre {
		f := s.one()
		res.preFlows++
		if f.err != nil {
			res.preFailed++
			continue
		}
		if last != "" && f.up != last {
			res.preSwitches++
		}
		last = f.up
	}
	if last == "" {
		return res, fmt.Errorf("no flow succeeded through %s before the kill (log: %s)", r.name, rp.log)
	}
	victim, survivor := ups[0], ups[1]
	if last == "b" {
		victim, survivor = ups[1], ups[0]
	}
	res.killed = victim.name
	// The kill comes when the next flow is due: no flow is in flight at
	// the kill, and the next one starts as soon as the upstream is gone.
	if d := time.Until(s.next); d > 0 {
		time.Sleep(d)
	}
	victim.p.kill()
	killAt := time.Now()
	res.killAfter = killAt.Sub(first)

	// Recovery: the flows go on until they have succeeded through the
	// survivor for steady, or for at most a check interval and a minute.
	rec := &recovery{survivor: survivor.name, steady: c.steady, killAt: killAt}
	recoverMax := r.interval + time.Minute
	for !rec.add(s.one()) {
		if time.Since(killAt) > recoverMax {
			break
		}
	}
	res.failed, res.firstErr = rec.failed, rec.firstErr
	if rec.runStart.IsZero() {
		return res, nil
	}
	res.recovered, res.recover, res.recoverFlow = true, rec.runStart.Sub(killAt), rec.runFlow

	// Restart the killed upstream and wait, flows going on, until the
	// router has probed it again; then count the flows that go back to it.
	if err := victim.start(c.xray); err != nil {
		return res, err
	}
	restartAt := time.Now()
	count := func(f flowRec, back, n *int) {
		*n++
		if f.err != nil {
			res.failedRestart++
			if res.firstErrReturn == "" {
				res.firstErrReturn = f.err.Error()
			}
		} else if f.up == victim.name {
			*back++
		}
	}
	for {
		at, ok := d.probedSince(victim.ip, restartAt)
		if ok && time.Since(at) > 500*time.Millisecond {
			res.remeasured, res.remeasure = true, at.Sub(restartAt)
			break
		}
		if time.Since(restartAt) > r.interval+time.Minute {
			break
		}
		count(s.one(), &res.waitBack, &res.waitFlows)
	}
	if res.remeasured {
		for range c.flap {
			count(s.one(), &res.flapBack, &res.flapFlows)
		}
	}
	return res, nil
}
