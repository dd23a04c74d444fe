// Command socksbench measures SOCKS5 proxies side by side: bulk TCP
// throughput both ways, connection rate with connect-to-first-byte latency,
// and resident memory per idle proxied connection. It starts its own
// servers as destinations (on 127.0.0.1 unless -dest names another local
// address) and drives every proxy through the same minimal SOCKS5 CONNECT
// client, alternating between proxies so a noisy moment does not decide a
// comparison.
//
// Usage:
//
//	socksbench -target NAME=ADDR,PID [-target NAME=ADDR,PID] [flags]
//
// The first target is the subject and every further one (at most two) a
// baseline; ratios are subject/baseline, one column per baseline. At the
// end it reads each target's peak resident memory over its whole life
// (VmHWM). Every flag has an environment default (BENCH_*), see -help.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"switchyard/bench/internal/benchkit"
	"syscall"
	"time"
)

type config struct {
	targets []target
	dest    netip.Addr // where the destination servers listen, and what CONNECT asks for
	bulk    time.Duration
	rate    time.Duration
	warmup  time.Duration
	rounds  int
	streams int
	workers int
	conns   int
	batches int
	quiet   time.Duration
	retries int
	only    map[string]bool
	tls     bool // the bulk streams run TLS 1.3 end to end
}

// phases, in the order they run: memory first, while the proxies are
// fresh (memory a process freed but kept would otherwise absorb the new
// connections and hide their cost), then the timed measurements in rounds.
var allPhases = []string{"mem", "up", "down", "rate"}

// maxTargets is the subject and up to two baselines.
const maxTargets = 3

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

func envBool(key string) bool {
	b, _ := strconv.ParseBool(os.Getenv(key))
	return b
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("socksbench", flag.ContinueOnError)
	var (
		c       config
		targets targetFlag
		only    string
		dest    string
		quick   bool
	)
	fs.Var(&targets, "target", "a proxy to measure, `NAME=ADDR,PID` (SOCKS5 listen address, process id); give one to three, the first is the subject, ratios are first/each other")
	fs.DurationVar(&c.bulk, "bulk", benchkit.EnvDuration("BENCH_BULK", 10*time.Second), "measured time of each bulk run, per direction (env BENCH_BULK)")
	fs.DurationVar(&c.rate, "rate", benchkit.EnvDuration("BENCH_RATE", 10*time.Second), "measured time of each connection-rate run (env BENCH_RATE)")
	fs.DurationVar(&c.warmup, "warmup", benchkit.EnvDuration("BENCH_WARMUP", time.Second), "unmeasured lead-in of every timed run (env BENCH_WARMUP)")
	fs.IntVar(&c.rounds, "rounds", benchkit.EnvInt("BENCH_ROUNDS", 3), "rounds of the timed runs, targets alternating; the best round counts (env BENCH_ROUNDS)")
	fs.IntVar(&c.streams, "streams", benchkit.EnvInt("BENCH_STREAMS", 8), "concurrent bulk streams (env BENCH_STREAMS)")
	fs.IntVar(&c.workers, "workers", benchkit.EnvInt("BENCH_WORKERS", 64), "concurrent connection-rate workers (env BENCH_WORKERS)")
	fs.IntVar(&c.conns, "conns", benchkit.EnvInt("BENCH_CONNS", 2000), "idle connections per memory batch (env BENCH_CONNS)")
	fs.IntVar(&c.batches, "batches", benchkit.EnvInt("BENCH_MEM_BATCHES", 2), "memory batches, each opened on top of the previous; the median counts (env BENCH_MEM_BATCHES)")
	fs.DurationVar(&c.quiet, "quiet", benchkit.EnvDuration("BENCH_QUIET", 30*time.Second), "before each run, wait up to this long for other processes to leave the CPUs idle (0: do not wait) (env BENCH_QUIET)")
	fs.IntVar(&c.retries, "retries", benchkit.EnvInt("BENCH_RETRIES", 2), "repeat a timed run marked DISTURBED up to this many times; every run counts toward the best (env BENCH_RETRIES)")
	fs.StringVar(&dest, "dest", benchkit.EnvString("BENCH_DEST", "127.0.0.1"), "local IP `address` the harness's sink, source and echo servers listen on and every SOCKS5 CONNECT asks for (env BENCH_DEST)")
	fs.StringVar(&only, "only", os.Getenv("BENCH_ONLY"), "comma-separated subset of phases: mem,up,down,rate (env BENCH_ONLY; default all)")
	fs.BoolVar(&c.tls, "tls", envBool("BENCH_TLS"), "bulk streams run TLS 1.3 end to end through the proxy, as HTTPS does (sink and source are TLS servers); the proxy's CPU then excludes that TLS, which the harness does (env BENCH_TLS)")
	fs.BoolVar(&quick, "quick", envBool("BENCH_QUICK"), "smoke run: 2 s runs, 0.5 s warm-up, one round, one batch of 500 (flags given explicitly still win) (env BENCH_QUICK)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(targets) < 1 || len(targets) > maxTargets {
		return nil, fmt.Errorf("give one to %d -target flags", maxTargets)
	}
	c.targets = targets
	ip, err := netip.ParseAddr(dest)
	if err != nil || ip.IsUnspecified() || ip.Zone() != "" {
		return nil, fmt.Errorf("-dest: want one IPv4 or IPv6 address (not unspecified, no zone), got %q", dest)
	}
	c.dest = ip.Unmap()
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickDefaults := []struct {
			flag, env string
			apply     func()
		}{
			{"bulk", "BENCH_BULK", func() { c.bulk = 2 * time.Second }},
			{"rate", "BENCH_RATE", func() { c.rate = 2 * time.Second }},
			{"warmup", "BENCH_WARMUP", func() { c.warmup = 500 * time.Millisecond }},
			{"rounds", "BENCH_ROUNDS", func() { c.rounds = 1 }},
			{"conns", "BENCH_CONNS", func() { c.conns = 500 }},
			{"batches", "BENCH_MEM_BATCHES", func() { c.batches = 1 }},
			{"quiet", "BENCH_QUIET", func() { c.quiet = 0 }},
			{"retries", "BENCH_RETRIES", func() { c.retries = 0 }},
		}
		for _, q := range quickDefaults {
			if !set[q.flag] && os.Getenv(q.env) == "" {
				q.apply()
			}
		}
	}
	if c.bulk <= 0 || c.rate <= 0 || c.warmup < 0 || c.rounds < 1 || c.streams < 1 ||
		c.workers < 1 || c.conns < 1 || c.batches < 1 || c.retries < 0 {
		return nil, fmt.Errorf("durations, rounds, streams, workers, conns and batches must be positive")
	}
	c.only = map[string]bool{}
	if only == "" {
		for _, p := range allPhases {
			c.only[p] = true
		}
	} else {
		for p := range strings.SplitSeq(only, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(allPhases, p) {
				return nil, fmt.Errorf("unknown phase %q (want mem, up, down, rate)", p)
			}
			c.only[p] = true
		}
	}
	return &c, nil
}

// raiseNofile lifts the soft descriptor limit to the hard one and reports
// the result.
func raiseNofile() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	return rl.Cur
}

// waitReady waits until t's process exists and its address accepts a TCP
// connection.
func waitReady(t target, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(t.pid)); err != nil {
			return fmt.Errorf("%s: process %d is gone", t.name, t.pid)
		}
		c, err := net.DialTimeout("tcp", t.addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s: %s does not accept connections: %w", t.name, t.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// results holds every run of one target.
type results struct {
	up, down []bulkResult
	rate     []rateResult
	mem      []memBatch
	peakKiB  int64 // VmHWM at the end of the run; 0 if unreadable
	errs     []string
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "socksbench:", err)
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "socksbench:", err)
		os.Exit(1)
	}
}

func run(c *config, w io.Writer) error {
	nofile := raiseNofile()
	if need := uint64(2*c.conns*c.batches + 256); c.only["mem"] && nofile < need {
		fmt.Fprintf(w, "warning: RLIMIT_NOFILE is %d, the memory phase needs about %d\n", nofile, need)
	}
	for _, t := range c.targets {
		if err := waitReady(t, 10*time.Second); err != nil {
			return err
		}
	}
	s, err := startServers(c.dest, c.tls)
	if err != nil {
		return err
	}
	defer s.close()

	res := make([]*results, len(c.targets))
	for i := range res {
		res[i] = &results{}
	}
	fmt.Fprintf(w, "socksbench: %s; servers on %s; bulk %v x %d streams, rate %v x %d workers, warm-up %v, %d round(s), memory %d batch(es) of %d conns\n",
		names(c.targets), c.dest, c.bulk, c.streams, c.rate, c.workers, c.warmup, c.rounds, c.batches, c.conns)

	disturbed := 0
	settle := func(t target) {
		if other, waited := waitQuiet(t.pid, c.quiet); other >= busyThreshold {
			fmt.Fprintf(w, "  (other processes still use %.2f cores after waiting %.0fs)\n", other, waited.Seconds())
		}
	}
	note := func(other float64) string {
		if other < busyThreshold {
			return ""
		}
		disturbed++
		return "  DISTURBED"
	}

	if c.only["mem"] {
		for i, t := range c.targets {
			settle(t)
			batches, skipped, err := measureMem(t, s, c.conns, c.batches)
			res[i].mem = append(res[i].mem, batches...)
			for k, b := range batches {
				fmt.Fprintf(w, "  mem    %-12s batch %d: %d conns, RSS %d -> %d KiB, %.1f KiB/conn, %.1f fds/conn (settled in %.1fs)%s\n",
					t.name, k+1, b.Conns, b.Before, b.After, b.PerConnKiB, b.FDsPerConn, b.SettledWithin.Seconds(), failNote(b.Failed, b.FirstErr))
			}
			if skipped != "" {
				fmt.Fprintf(w, "  mem    %-12s %s\n", t.name, skipped)
			}
			if err != nil {
				res[i].errs = append(res[i].errs, "mem: "+err.Error())
				fmt.Fprintf(w, "  mem    %-12s error: %v\n", t.name, err)
			}
		}
	}

	for r := range c.rounds {
		order := make([]int, len(c.targets))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, phase := range []string{"up", "down"} {
			if !c.only[phase] {
				continue
			}
			for _, i := range order {
				t := c.targets[i]
				for try := 0; try <= c.retries; try++ {
					settle(t)
					b, err := measureBulk(t, s, phase == "up", c.streams, c.warmup, c.bulk)
					if err != nil {
						res[i].errs = append(res[i].errs, phase+": "+err.Error())
						fmt.Fprintf(w, "  %-6s %-12s round %d: error: %v\n", phase, t.name, r+1, err)
						break
					}
					if phase == "up" {
						res[i].up = append(res[i].up, b)
					} else {
						res[i].down = append(res[i].down, b)
					}
					fmt.Fprintf(w, "  %-6s %-12s round %d: %8.1f MiB/s  proxy CPU %.2f, others %.2f cores%s%s\n",
						phase, t.name, r+1, b.MiBps, b.CPU, b.Other, note(b.Other), failNote(int(b.Errors), "stream ended early"))
					if b.Other < busyThreshold {
						break
					}
				}
			}
		}
		if c.only["rate"] {
			for _, i := range order {
				t := c.targets[i]
				for try := 0; try <= c.retries; try++ {
					settle(t)
					rr := measureRate(t, s, c.workers, c.warmup, c.rate)
					res[i].rate = append(res[i].rate, rr)
					fmt.Fprintf(w, "  rate   %-12s round %d: %8.0f conn/s  p50 %s  p99 %s  proxy CPU %.2f, others %.2f cores%s%s\n",
						t.name, r+1, rr.PerSec, ms(rr.P50), ms(rr.P99), rr.CPU, rr.Other, note(rr.Other), failNote(int(rr.Errors), rr.FirstErr))
					if rr.Count == 0 {
						res[i].errs = append(res[i].errs, "rate: no exchange completed: "+rr.FirstErr)
						break
					}
					if rr.Other < busyThreshold {
						break
					}
				}
			}
		}
	}
	if n := s.waitDrained(5 * time.Second); n > 0 {
		fmt.Fprintf(w, "warning: %d server-side connections still open at the end\n", n)
	}
	for i, t := range c.targets {
		peak, err := procPeakRSS(t.pid)
		if err != nil {
			res[i].errs = append(res[i].errs, "peak RSS: "+err.Error())
			continue
		}
		res[i].peakKiB = peak
	}
	fmt.Fprintln(w)
	report(w, c, res)
	if disturbed > 0 {
		fmt.Fprintf(w, "\nwarning: %d run(s) shared the CPUs with other busy processes (DISTURBED above); compare with care\n", disturbed)
	}
	return nil
}
