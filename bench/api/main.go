// Command api measures the Clash API's GET /connections and the
// connection streams of switchyard and sing-box holding the same flows:
// for each router it starts a local VLESS-over-gRPC echo server (echo.go),
// the router with a SOCKS5 inbound whose flows all go out to it, opens
// -flows flows through the router, and measures
//
//   - GET /connections: the first call, then the median and fastest of
//     -gets calls (the time until the whole answer is read), the answer's
//     size, and the router's allocations per call (runtime.MemStats from
//     its pprof listener: switchyard's SWITCHYARD_PPROF, sing-box's
//     experimental.debug);
//   - the streams' CPU: while -changing flows move every second (a 4-byte
//     echo each), the router's CPU per second (all threads, from
//     /proc/PID/task/*/schedstat) with one subscriber of a stream, less
//     the same without one, medians over -rounds: the Clash WebSocket
//     /connections (both, one subscriber) and switchyard's native delta
//     stream /switchyard/v1/connections (-delta-subscribers at once, the
//     cost divided among them), each at ?interval=-interval.
//
// Usage:
//
//	api -switchyard PATH -singbox PATH [flags]
//
// Every flag has an environment default (BENCH_*), see -help.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"switchyard/internal/vlessecho"
	"syscall"
	"time"

	"switchyard/bench/internal/benchkit"
)

type config struct {
	switchyard, singbox string
	work                string
	routers             []string
	flows, workers      int
	gets                int
	changing            int
	interval            time.Duration
	window              time.Duration
	rounds              int
	deltaSubs           int
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	var (
		c       config
		routers string
		quick   bool
	)
	fs.StringVar(&c.switchyard, "switchyard", os.Getenv("BENCH_SWITCHYARD"), "switchyard binary (env BENCH_SWITCHYARD)")
	fs.StringVar(&c.singbox, "singbox", os.Getenv("BENCH_SINGBOX"), "sing-box binary built with with_clash_api (env BENCH_SINGBOX)")
	fs.StringVar(&c.work, "work", os.Getenv("BENCH_WORK"), "folder for the configs and logs (env BENCH_WORK; default a new temporary one)")
	fs.StringVar(&routers, "routers", benchkit.EnvString("BENCH_ROUTERS", "switchyard,sing-box"), "routers to measure, in order (env BENCH_ROUTERS)")
	fs.IntVar(&c.flows, "flows", benchkit.EnvInt("BENCH_FLOWS", 10000), "flows held open through each router (env BENCH_FLOWS)")
	fs.IntVar(&c.workers, "workers", benchkit.EnvInt("BENCH_WORKERS", 64), "flows opened side by side (env BENCH_WORKERS)")
	fs.IntVar(&c.gets, "gets", benchkit.EnvInt("BENCH_GETS", 21), "timed GET /connections calls (env BENCH_GETS)")
	fs.IntVar(&c.changing, "changing", benchkit.EnvInt("BENCH_CHANGING", 100), "flows that move every second while the streams are measured (env BENCH_CHANGING)")
	fs.DurationVar(&c.interval, "interval", benchkit.EnvDuration("BENCH_INTERVAL", time.Second), "the streams' ?interval= (env BENCH_INTERVAL)")
	fs.DurationVar(&c.window, "window", benchkit.EnvDuration("BENCH_WINDOW", 5*time.Second), "each CPU window (env BENCH_WINDOW)")
	fs.IntVar(&c.rounds, "rounds", benchkit.EnvInt("BENCH_ROUNDS", 3), "CPU windows per stream, and as many without a subscriber (env BENCH_ROUNDS)")
	fs.IntVar(&c.deltaSubs, "delta-subscribers", benchkit.EnvInt("BENCH_DELTA_SUBSCRIBERS", 10), "subscribers of the delta stream at once, so that its cost stands above the noise; reported per subscriber (env BENCH_DELTA_SUBSCRIBERS)")
	fs.BoolVar(&quick, "quick", os.Getenv("BENCH_QUICK") != "", "smoke run: 2000 flows, 5 gets, 2s windows, 1 round (flags given explicitly still win) (env BENCH_QUICK)")
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
			{"flows", "BENCH_FLOWS", func() { c.flows = 2000 }},
			{"gets", "BENCH_GETS", func() { c.gets = 5 }},
			{"window", "BENCH_WINDOW", func() { c.window = 2 * time.Second }},
			{"rounds", "BENCH_ROUNDS", func() { c.rounds = 1 }},
		} {
			if !set[q.flag] && os.Getenv(q.env) == "" {
				q.apply()
			}
		}
	}
	for r := range strings.SplitSeq(routers, ",") {
		switch r = strings.TrimSpace(r); r {
		case "switchyard", "sing-box":
			c.routers = append(c.routers, r)
		case "":
		default:
			return nil, fmt.Errorf("unknown router %q (want switchyard, sing-box)", r)
		}
	}
	switch {
	case len(c.routers) == 0:
		return nil, errors.New("no router to measure")
	case c.switchyard == "" && strings.Contains(routers, "switchyard"):
		return nil, errors.New("-switchyard is required")
	case c.singbox == "" && strings.Contains(routers, "sing-box"):
		return nil, errors.New("-singbox is required")
	case c.flows < 1 || c.workers < 1 || c.gets < 1 || c.rounds < 1 || c.deltaSubs < 1 || c.window <= 0 || c.interval < 100*time.Millisecond:
		return nil, errors.New("flows, workers, gets, rounds and window must be positive, interval at least 100ms")
	case c.changing < 1 || c.changing > c.flows:
		return nil, errors.New("changing must be from 1 to flows")
	}
	return &c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(2)
	}
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// result is one router's figures.
type result struct {
	router  string
	get     getFigures
	streams []streamFigures
	rssKiB  int64
	open    time.Duration
}

func run(c *config, w io.Writer) error {
	if err := raiseFileLimit(uint64(c.flows) + 1000); err != nil {
		return err
	}
	if c.work == "" {
		dir, err := os.MkdirTemp("", "switchyard-bench-api.")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.work = dir
	}
	echo, err := vlessecho.Start(4 * c.flows)
	if err != nil {
		return err
	}
	defer echo.Close()
	fmt.Fprintf(w, "api: %d flows per router (SOCKS5 in, VLESS over gRPC out to a local echo); GET /connections ×%d; streams at interval %v with %d flows moving per second, CPU windows of %v ×%d\n",
		c.flows, c.gets, c.interval, c.changing, c.window, c.rounds)
	var results []result
	for _, name := range c.routers {
		bin := c.switchyard
		if name == "sing-box" {
			bin = c.singbox
		}
		dir := filepath.Join(c.work, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		res, err := measureRouter(c, name, bin, dir, echo)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(w, "  %-10s %d flows open in %v\n", name, c.flows, res.open.Round(time.Millisecond))
		results = append(results, res)
	}
	fmt.Fprintln(w)
	report(w, c, results)
	return nil
}

func measureRouter(c *config, name, bin, dir string, echo *vlessecho.Server) (result, error) {
	res := result{router: name}
	r, err := startRouter(name, bin, dir, echo.Addr())
	if err != nil {
		return res, err
	}
	defer r.stop()
	at := time.Now()
	conns, err := openFlows(r, "echo.test:7", c.flows, c.workers)
	if err != nil {
		return res, err
	}
	defer closeAll(conns)
	res.open = time.Since(at)
	if err := waitListed(r, c.flows, 30*time.Second); err != nil {
		return res, err
	}
	if res.get, err = measureGets(r, c.gets, c.flows); err != nil {
		return res, err
	}
	streams := []stream{{fmt.Sprintf("/connections?interval=%d", c.interval.Milliseconds()), 1}}
	if name == "switchyard" {
		streams = append(streams, stream{fmt.Sprintf("/switchyard/v1/connections?interval=%d", c.interval.Milliseconds()), c.deltaSubs})
	}
	ch := startChanger(conns, c.changing)
	res.streams, err = measureStreams(r, streams, c.rounds, c.window)
	if cerr := ch.end(); err == nil && cerr != nil {
		err = fmt.Errorf("moving flows: %w", cerr)
	}
	if err != nil {
		return res, err
	}
	res.rssKiB, _ = benchkit.ProcStatusKiB(r.pid(), "VmRSS:")
	return res, nil
}

// raiseFileLimit lifts the soft descriptor limit to n, or as far as the
// hard one allows, failing when that is short of n.
func raiseFileLimit(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= n {
		return nil
	}
	want := lim
	want.Cur = min(max(n, lim.Cur), lim.Max)
	if want.Max < n {
		want.Max, want.Cur = n, n // as root with CAP_SYS_RESOURCE
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
			return nil
		}
		want.Max, want.Cur = lim.Max, lim.Max
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return err
	}
	if want.Cur < n {
		return fmt.Errorf("the descriptor limit is %d, the flows need %d (lower -flows)", want.Cur, n)
	}
	return nil
}
