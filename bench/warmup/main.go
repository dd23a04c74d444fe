// Command warmup measures what switchyard's warm-up buys on a distant
// server and what it costs: the time to the first byte of a new flow over
// a 100 ms RTT link to a real Xray server (VLESS over TLS), for switchyard
// with warm-up on and off and for Xray and sing-box as clients of the same
// server, side by side in one run; then the memory (VmRSS) and the open
// descriptors switchyard holds with 50 nodes in one Selector and one
// URLTest, warm-up at its defaults and off.
//
// The link is netlab's: a network namespace made for the run, reached over
// a link that delays every packet by -delay each way (netem, or netlab's
// user-space delay line where the kernel has no sch_netem). The Xray
// server and an HTTP target run inside it; every client runs in the root
// namespace with a SOCKS5 inbound on loopback. It needs root.
//
// Usage:
//
//	warmup -xray PATH -singbox PATH -switchyard PATH -work DIR [flags]
//
// Every flag has an environment default (BENCH_*), see -help.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"switchyard/bench/internal/benchkit"
	"switchyard/test/netem/netlab"
)

type config struct {
	xray, singbox, switchyard string
	work                      string
	clients                   []string
	runs                      int
	gap                       time.Duration
	settle                    time.Duration
	delay                     time.Duration
	flowTimeout               time.Duration
	nodes                     int
	memAt                     []time.Duration
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("warmup", flag.ContinueOnError)
	var (
		c              config
		clients, memAt string
		quick          bool
	)
	fs.StringVar(&c.xray, "xray", os.Getenv("BENCH_XRAY"), "Xray binary: the server, and a client (env BENCH_XRAY)")
	fs.StringVar(&c.singbox, "singbox", os.Getenv("BENCH_SINGBOX"), "sing-box binary, a client (env BENCH_SINGBOX)")
	fs.StringVar(&c.switchyard, "switchyard", os.Getenv("BENCH_SWITCHYARD"), "switchyard binary (env BENCH_SWITCHYARD)")
	fs.StringVar(&c.work, "work", os.Getenv("BENCH_WORK"), "folder for the configs and logs (env BENCH_WORK; default a new temporary one)")
	fs.StringVar(&clients, "clients", benchkit.EnvString("BENCH_CLIENTS", strings.Join(allClients, ",")), "clients to measure, in order (env BENCH_CLIENTS)")
	fs.IntVar(&c.runs, "runs", benchkit.EnvInt("BENCH_RUNS", 20), "new flows measured per client (env BENCH_RUNS)")
	fs.DurationVar(&c.gap, "gap", benchkit.EnvDuration("BENCH_GAP", 2*time.Second), "pause between two flows of a client, every client alike: warm-up's time to refill (env BENCH_GAP)")
	fs.DurationVar(&c.settle, "settle", benchkit.EnvDuration("BENCH_SETTLE", 3*time.Second), "pause between a client's start and its first flow, every client alike (env BENCH_SETTLE)")
	fs.DurationVar(&c.delay, "delay", benchkit.EnvDuration("BENCH_DELAY", 50*time.Millisecond), "the link's delay each way; the RTT is twice it (env BENCH_DELAY)")
	fs.DurationVar(&c.flowTimeout, "flow-timeout", benchkit.EnvDuration("BENCH_FLOW_TIMEOUT", 10*time.Second), "a flow not answered in this long fails the run (env BENCH_FLOW_TIMEOUT)")
	fs.IntVar(&c.nodes, "nodes", benchkit.EnvInt("BENCH_NODES", 50), "nodes of the memory phase, VLESS and Trojan alternately; 0 skips it (env BENCH_NODES)")
	fs.StringVar(&memAt, "mem-at", benchkit.EnvString("BENCH_MEM_AT", "2s,6s,15s"), "when after switchyard is ready the memory phase reads VmRSS and descriptors (env BENCH_MEM_AT)")
	fs.BoolVar(&quick, "quick", os.Getenv("BENCH_QUICK") != "", "smoke run: 5 flows per client, 1s gap, 10 nodes (flags given explicitly still win) (env BENCH_QUICK)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["runs"] {
			c.runs = 5
		}
		if !set["gap"] {
			c.gap = time.Second
		}
		if !set["nodes"] {
			c.nodes = 10
		}
	}
	for _, name := range strings.Split(clients, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !isClient(name) {
			return nil, fmt.Errorf("unknown client %q (want some of %s)", name, strings.Join(allClients, ","))
		}
		c.clients = append(c.clients, name)
	}
	for _, s := range strings.Split(memAt, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-mem-at: %w", err)
		}
		c.memAt = append(c.memAt, d)
	}
	switch {
	case c.runs < 1:
		return nil, errors.New("-runs must be at least 1")
	case c.delay <= 0:
		return nil, errors.New("-delay must be positive")
	case c.xray == "" || c.switchyard == "":
		return nil, errors.New("-xray and -switchyard are required")
	case c.singbox == "" && contains(c.clients, "sing-box"):
		return nil, errors.New("-singbox is required to measure sing-box")
	}
	return &c, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "warmup:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "warmup:", err)
		os.Exit(1)
	}
}

// lab is what every phase runs against: the path, the server inside it
// and the target behind the server.
type lab struct {
	c            *config
	path         *netlab.Path
	target       *netlab.Target
	cert         string
	warmInBuild  bool // this switchyard's loader takes [warmup]
	serverAddr   string
	trojanServer string
}

func run(c *config) (err error) {
	if c.work == "" {
		if c.work, err = os.MkdirTemp("", "switchyard-bench-warmup"); err != nil {
			return err
		}
	}
	path, err := netlab.New(c.delay)
	if err != nil {
		return err
	}
	defer path.Close()
	target, err := path.StartTarget()
	if err != nil {
		return err
	}
	defer target.Close()
	cert, key, err := netlab.WriteCert(c.work)
	if err != nil {
		return err
	}
	l := &lab{c: c, path: path, target: target, cert: cert,
		serverAddr:   fmt.Sprintf("%s:%d", path.PeerAddr, netlab.VLESSPort),
		trojanServer: fmt.Sprintf("%s:%d", path.PeerAddr, netlab.TrojanPort)}
	server, err := l.startServer(key, max(c.nodes, 1))
	if err != nil {
		return err
	}
	defer server.stop()
	if l.warmInBuild, err = l.switchyardTakesWarmup(); err != nil {
		return err
	}
	fmt.Printf("link: %s; %v each way, RTT %v\n", path.Mode, c.delay, path.RTT())
	fmt.Printf("server: Xray in namespace %s at %s (VLESS over TLS), target %s inside it\n", path.NS, l.serverAddr, target.Addr)
	if !l.warmInBuild {
		fmt.Println("switchyard: this build's loader refuses [warmup]: the warm clients are left out, \"switchyard off\" runs without the table")
	}
	fmt.Printf("flows: %d per client, a new SOCKS5 connection each; %v after the start, %v between two\n\n", c.runs, c.settle, c.gap)

	results := map[string][]time.Duration{}
	for _, name := range c.clients {
		if warmClient(name) && !l.warmInBuild {
			continue
		}
		fmt.Fprintf(os.Stderr, "measuring %s\n", name)
		ds, err := l.firstBytes(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results[name] = ds
	}
	printFirstBytes(c, path.RTT(), results)

	if c.nodes > 0 {
		fmt.Fprintf(os.Stderr, "memory phase: %d nodes\n", c.nodes)
		mem, err := l.memory()
		if err != nil {
			return fmt.Errorf("memory phase: %w", err)
		}
		printMemory(c, mem)
	}
	return nil
}

// startServer runs the Xray server inside the namespace with accounts
// accounts per protocol and waits for both inbounds across the link.
func (l *lab) startServer(key string, accounts int) (*proc, error) {
	cfg := filepath.Join(l.c.work, "server.json")
	if err := os.WriteFile(cfg, []byte(netlab.XrayServer(l.path.PeerAddr, l.cert, key, accounts)), 0o600); err != nil {
		return nil, err
	}
	cmd := l.path.Command(l.c.xray, "run", "-c", cfg)
	p, err := startCmd("xray server", filepath.Join(l.c.work, "server.log"), cmd)
	if err != nil {
		return nil, err
	}
	for _, a := range []string{l.serverAddr, l.trojanServer} {
		if err := p.waitListening(a, 15*time.Second); err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}
