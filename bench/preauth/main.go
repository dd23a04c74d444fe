// Command preauth measures what a proxy holds for each connection that
// never finishes its handshake: it opens -conns connections to each target's
// mixed (HTTP) port, each sending a request head of -head KiB without its
// end, and reads the proxy's RSS before, while they are held, and after
// they close. Targets are measured one after the other, in one run.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type target struct {
	name, addr string
	pid        int
}

type targets []target

func (ts *targets) String() string { return fmt.Sprint(*ts) }

func (ts *targets) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	addr, pid, ok2 := strings.Cut(rest, ",")
	n, err := strconv.Atoi(pid)
	if !ok || !ok2 || err != nil {
		return fmt.Errorf("want name=host:port,pid, got %q", v)
	}
	*ts = append(*ts, target{name, addr, n})
	return nil
}

type result struct {
	before, held, after int64 // KiB
	open                int   // connections still open when measured
}

func main() {
	var ts targets
	flag.Var(&ts, "target", "name=host:port,pid of a proxy's mixed port (repeat; the first is the subject)")
	conns := flag.Int("conns", envInt("BENCH_CONNS", 1000), "held connections per target")
	headKiB := flag.Int("head", envInt("BENCH_HEAD_KIB", 32), "KiB of request head each connection sends")
	settle := flag.Duration("settle", 3*time.Second, "wait before each reading")
	flag.Parse()
	if len(ts) == 0 {
		fmt.Fprintln(os.Stderr, "preauth: no -target")
		os.Exit(2)
	}
	results := make([]result, len(ts))
	for i, t := range ts {
		r, err := measure(t, *conns, *headKiB, *settle)
		if err != nil {
			fmt.Fprintf(os.Stderr, "preauth: %s: %v\n", t.name, err)
			os.Exit(1)
		}
		results[i] = r
	}
	fmt.Printf("%d connections, each holding a %d KiB request head without its end\n\n", *conns, *headKiB)
	fmt.Printf("%36s", "metric")
	for _, t := range ts {
		fmt.Printf("  %10s", t.name)
	}
	if len(ts) == 2 {
		fmt.Printf("  %6s  %s", "ratio", "better")
	}
	fmt.Println()
	row := func(name string, f func(r result) float64) {
		fmt.Printf("%36s", name)
		for _, r := range results {
			fmt.Printf("  %10.1f", f(r))
		}
		if len(ts) == 2 && f(results[1]) != 0 {
			fmt.Printf("  %5.2fx  %s", f(results[0])/f(results[1]), "lower")
		}
		fmt.Println()
	}
	row("KiB RSS per held pre-auth conn", func(r result) float64 {
		return float64(r.held-r.before) / float64(max(r.open, 1))
	})
	row("MiB RSS held above base", func(r result) float64 { return float64(r.held-r.before) / 1024 })
	row("MiB RSS above base after close", func(r result) float64 { return float64(r.after-r.before) / 1024 })
	fmt.Printf("%36s", "connections still open when measured")
	for _, r := range results {
		fmt.Printf("  %10d", r.open)
	}
	fmt.Println()
}

func measure(t target, n, headKiB int, settle time.Duration) (result, error) {
	var r result
	var err error
	if r.before, err = rss(t.pid); err != nil {
		return r, err
	}
	filler := []byte(strings.Repeat("a", 1024))
	cs := make([]net.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", t.addr)
			if err != nil {
				return
			}
			mu.Lock()
			cs = append(cs, c)
			mu.Unlock()
			io.WriteString(c, "GET http://example.com/ HTTP/1.1\r\nX: ")
			for range headKiB {
				if _, err := c.Write(filler); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(settle)
	if r.held, err = rss(t.pid); err != nil {
		return r, err
	}
	// A connection the proxy closed reads EOF at once; one it holds times
	// out.
	for _, c := range cs {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				r.open++
			}
		}
	}
	for _, c := range cs {
		c.Close()
	}
	time.Sleep(2 * settle)
	r.after, err = rss(t.pid)
	return r, err
}

// rss reads VmRSS of pid in KiB.
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kib int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib)
			return kib, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}
