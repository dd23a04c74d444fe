package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"switchyard/bench/internal/benchkit"
	"sync/atomic"
	"time"
)

type loadConfig struct {
	targets  []target
	stub     string
	stubPID  int
	assocs   int
	depth    int
	duration time.Duration
	lead     time.Duration
	rounds   int
	timeout  time.Duration
	names    int
	quiet    time.Duration
	modes    []string
}

type targetFlag []target

func (f *targetFlag) String() string { return fmt.Sprint(*f) }

func (f *targetFlag) Set(v string) error {
	name, addr, pid, err := benchkit.ParseTarget(v)
	if err != nil {
		return err
	}
	*f = append(*f, target{name: name, addr: addr, pid: pid})
	return nil
}

func parseLoadFlags(args []string) (*loadConfig, error) {
	fs := flag.NewFlagSet("dnsbench load", flag.ContinueOnError)
	var (
		c       loadConfig
		targets targetFlag
		stub    string
		modes   string
		quick   bool
	)
	fs.Var(&targets, "target", "NAME=ADDR,PID: a router's SOCKS5 inbound and its process (twice: subject, then baseline)")
	fs.StringVar(&stub, "stub", os.Getenv("BENCH_STUB"), "ADDR[,PID] of the stub upstream (BENCH_STUB); with PID its CPU is not counted as another process's")
	fs.IntVar(&c.assocs, "assoc", benchkit.EnvInt("BENCH_ASSOC", 8), "associations per run (BENCH_ASSOC)")
	fs.IntVar(&c.depth, "inflight", benchkit.EnvInt("BENCH_INFLIGHT", 16), "queries in flight per association (BENCH_INFLIGHT)")
	fs.DurationVar(&c.duration, "duration", benchkit.EnvDuration("BENCH_DURATION", 10*time.Second), "measured time of each run (BENCH_DURATION; quick 2s)")
	fs.DurationVar(&c.lead, "lead", benchkit.EnvDuration("BENCH_LEAD", time.Second), "unmeasured lead-in of each run, under the same load (BENCH_LEAD; quick 0.5s)")
	fs.IntVar(&c.rounds, "rounds", benchkit.EnvInt("BENCH_ROUNDS", 3), "rounds; each runs every mode against every target, the order of targets flipping every round (BENCH_ROUNDS; quick 1)")
	fs.DurationVar(&c.timeout, "timeout", benchkit.EnvDuration("BENCH_TIMEOUT", 2*time.Second), "a query without an answer this long is lost (BENCH_TIMEOUT)")
	fs.IntVar(&c.names, "names", benchkit.EnvInt("BENCH_NAMES", 100), "names of the warm set (BENCH_NAMES)")
	fs.DurationVar(&c.quiet, "quiet", benchkit.EnvDuration("BENCH_QUIET", 15*time.Second), "before each run, wait up to this long for other processes to leave the CPUs idle (BENCH_QUIET; quick 0)")
	fs.StringVar(&modes, "modes", benchkit.EnvString("BENCH_MODES", "warm,cold"), "modes to run, in order (BENCH_MODES)")
	fs.BoolVar(&quick, "quick", os.Getenv("BENCH_QUICK") != "", "smoke run: the quick values above unless given explicitly (BENCH_QUICK)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickDefault := func(name, env string, apply func()) {
			if !set[name] && os.Getenv(env) == "" {
				apply()
			}
		}
		quickDefault("duration", "BENCH_DURATION", func() { c.duration = 2 * time.Second })
		quickDefault("lead", "BENCH_LEAD", func() { c.lead = 500 * time.Millisecond })
		quickDefault("rounds", "BENCH_ROUNDS", func() { c.rounds = 1 })
		quickDefault("quiet", "BENCH_QUIET", func() { c.quiet = 0 })
	}
	c.targets = targets
	if len(c.targets) == 0 || len(c.targets) > 2 {
		return nil, errors.New("give one or two -target")
	}
	addr, pidText, hasPID := strings.Cut(stub, ",")
	if addr == "" {
		return nil, errors.New("no -stub")
	}
	c.stub = addr
	if hasPID {
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("-stub: bad pid %q", pidText)
		}
		c.stubPID = pid
	}
	for m := range strings.SplitSeq(modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "warm", "cold":
			c.modes = append(c.modes, m)
		case "":
		default:
			return nil, fmt.Errorf("unknown mode %q (want warm, cold)", m)
		}
	}
	switch {
	case len(c.modes) == 0:
		return nil, errors.New("no mode to run")
	case c.assocs < 1, c.depth < 1, c.depth > 1<<15, c.names < 1, c.rounds < 1:
		return nil, errors.New("-assoc, -inflight (at most 32768), -names and -rounds must be positive")
	case c.duration <= 0, c.timeout <= 0:
		return nil, errors.New("-duration and -timeout must be positive")
	}
	return &c, nil
}

// runResult is one measured run of one mode against one target.
type runResult struct {
	target, mode string
	round        int
	qps          float64 // valid answers per second in the measured window
	answered     int64   // in the window
	sent         int64   // the whole run: lead-in, window and drain
	lost         int64
	bad          int64
	late         int64
	firstBad     string
	warmupLost   int64 // queries of the warm-up pass without an answer
	cpu          cpuUse
	stubQueries  int64 // queries the stub received during the window
	ended        int   // associations the router closed
	disturbed    bool
}

// cpuPer1k is the router's CPU milliseconds per 1,000 answers.
func (r runResult) cpuPer1k() float64 {
	if r.answered == 0 {
		return 0
	}
	return r.cpu.router * 1e6 / float64(r.answered)
}

func runLoad(args []string) error {
	c, err := parseLoadFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if _, err := stubCount(c.stub); err != nil {
		return fmt.Errorf("the stub at %s does not answer: %w", c.stub, err)
	}
	fmt.Printf("dns: %d associations x %d queries in flight, %v runs after a %v lead-in, %d round(s), lost after %v\n",
		c.assocs, c.depth, c.duration, c.lead, c.rounds, c.timeout)

	warm := make([][]byte, c.names)
	for i := range warm {
		warm[i] = wireName("w" + strconv.Itoa(i) + ".bench.test")
	}
	// Cold names carry the run's number and a nonce of this process, so no
	// router has seen one before, whatever ran against it earlier.
	nonce := strconv.FormatUint(rand.Uint64()&0xffffff, 36)

	var results []runResult
	run := 0
	for round := range c.rounds {
		order := c.targets
		if round%2 == 1 && len(order) == 2 {
			order = []target{order[1], order[0]}
		}
		for _, mode := range c.modes {
			for _, t := range order {
				run++
				r, err := measure(c, t, mode, warm, fmt.Sprintf("r%d%s", run, nonce))
				if err != nil {
					return fmt.Errorf("%s, %s: %w", t.name, mode, err)
				}
				r.round = round + 1
				printRun(r)
				results = append(results, r)
			}
		}
	}
	report(c, results)
	return nil
}

// measure is one run: it opens the associations, in warm mode asks each
// name of the warm set once through them, keeps the queries in flight for
// the lead-in and the measured window, then stops sending and waits for
// what is in flight.
func measure(c *loadConfig, t target, mode string, warm [][]byte, runID string) (runResult, error) {
	r := runResult{target: t.name, mode: mode}
	other := waitQuiet(t.pid, c.stubPID, c.quiet)
	if other >= busyThreshold {
		fmt.Printf("  (other processes still use %.2f cores)\n", other)
	}
	as := make([]*assoc, 0, c.assocs)
	defer func() {
		for _, a := range as {
			a.close()
		}
	}()
	for range c.assocs {
		a, err := openAssoc(t.addr)
		if err != nil {
			return r, err
		}
		as = append(as, a)
	}

	if mode == "warm" {
		// One pass over the set, split among the associations.
		var wc counts
		var on atomic.Bool
		on.Store(true)
		per := (len(warm) + len(as) - 1) / len(as)
		runWorkers(as, c.depth, c.timeout, func(k int) namer {
			lo := min(k*per, len(warm))
			hi := min(lo+per, len(warm))
			return &warmNames{names: warm, i: lo, left: hi - lo, once: true}
		}, &wc, &on).Wait()
		r.warmupLost = wc.lost.Load() + wc.bad.Load()
		if wc.answered.Load() == 0 {
			msg := "no answer"
			if p := wc.firstBad.Load(); p != nil {
				msg = *p
			}
			return r, fmt.Errorf("warm-up pass: %s", msg)
		}
	}

	var cnt counts
	var sending atomic.Bool
	sending.Store(true)
	names := func(k int) namer {
		if mode == "warm" {
			return &warmNames{names: warm, i: k * len(warm) / len(as)}
		}
		return &coldNames{suffix: wireName("a" + strconv.Itoa(k) + "." + runID + ".bench.test")}
	}
	wg := runWorkers(as, c.depth, c.timeout, names, &cnt, &sending)

	time.Sleep(c.lead)
	s0, err0 := stubCount(c.stub)
	a0, m0 := cnt.answered.Load(), markCPU(t.pid, c.stubPID)
	time.Sleep(c.duration)
	a1, m1 := cnt.answered.Load(), markCPU(t.pid, c.stubPID)
	s1, err1 := stubCount(c.stub)
	sending.Store(false)
	wg.Wait()

	r.cpu = m1.since(m0)
	r.answered = a1 - a0
	r.qps = float64(r.answered) / r.cpu.secs
	r.sent, r.lost, r.bad, r.late = cnt.sent.Load(), cnt.lost.Load(), cnt.bad.Load(), cnt.late.Load()
	if p := cnt.firstBad.Load(); p != nil {
		r.firstBad = *p
	}
	r.stubQueries = -1
	if err0 == nil && err1 == nil {
		r.stubQueries = int64(s1-s0) - 1 // s1 counts its own query
	}
	for _, a := range as {
		if a.ended.Load() {
			r.ended++
		}
	}
	r.disturbed = r.cpu.other >= busyThreshold
	return r, nil
}

func printRun(r runResult) {
	mark := ""
	if r.disturbed {
		mark = "  DISTURBED"
	}
	fmt.Printf("round %d %s %-12s %9.0f q/s  lost %d/%d  bad %d  late %d  router %.2f cores, %.1f ms CPU per 1k  stub +%d (%.2f cores)  other %.2f cores%s\n",
		r.round, r.mode, r.target, r.qps, r.lost, r.sent, r.bad, r.late, r.cpu.router/r.cpu.secs, r.cpuPer1k(),
		r.stubQueries, r.cpu.stub/r.cpu.secs, r.cpu.other, mark)
	if r.firstBad != "" {
		fmt.Printf("  first bad answer: %s\n", r.firstBad)
	}
	if r.warmupLost > 0 {
		fmt.Printf("  warm-up pass: %d names without a valid answer\n", r.warmupLost)
	}
	if r.ended > 0 {
		fmt.Printf("  %d association(s) closed by the router during the run\n", r.ended)
	}
}
