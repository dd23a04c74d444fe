package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// countEntries decodes a /connections answer and counts its entries.
func countEntries(b []byte) (int, error) {
	var v struct {
		Connections []struct {
			ID string `json:"id"`
		} `json:"connections"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, err
	}
	return len(v.Connections), nil
}

// waitListed waits until r's GET /connections lists want entries.
func waitListed(r *router, want int, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		b, err := get("http://" + r.api + "/connections")
		n := 0
		if err == nil {
			n, err = countEntries(b)
		}
		if err == nil && n == want {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s lists %d connections, want %d (%v)", r.name, n, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// memStats reads the runtime's cumulative allocation counts from a pprof
// heap listing (debug=1 ends with the runtime.MemStats).
func memStats(prof string) (totalAlloc, mallocs uint64, err error) {
	b, err := get("http://" + prof + "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, 0, err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		for key, dst := range map[string]*uint64{"# TotalAlloc = ": &totalAlloc, "# Mallocs = ": &mallocs} {
			if rest, ok := bytes.CutPrefix([]byte(line), []byte(key)); ok {
				v, perr := strconv.ParseUint(string(rest), 10, 64)
				if perr == nil {
					*dst = v
					found++
				}
			}
		}
	}
	if found < 2 {
		return 0, 0, errors.New("no TotalAlloc and Mallocs in " + prof + "'s heap listing")
	}
	return totalAlloc, mallocs, nil
}

// threadsCPU is the CPU time every thread of pid has run, to the
// nanosecond, from /proc/PID/task/*/schedstat.
func threadsCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of %d", pid)
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just exited
		}
		f := bytes.Fields(b)
		if len(f) > 0 {
			v, _ := strconv.ParseInt(string(f[0]), 10, 64)
			ns += v
		}
	}
	return time.Duration(ns), nil
}

// getFigures is GET /connections measured: the first call's time, the
// median and the fastest of n more, the answer's size, and what the
// router allocated per call.
type getFigures struct {
	first, median, fastest time.Duration
	bytes                  int
	allocBytes, mallocs    float64 // per call; -1: not measured
}

func measureGets(r *router, n, want int) (getFigures, error) {
	url := "http://" + r.api + "/connections"
	g := getFigures{allocBytes: -1, mallocs: -1}
	at := time.Now()
	b, err := get(url)
	if err != nil {
		return g, err
	}
	g.first, g.bytes = time.Since(at), len(b)
	if c, err := countEntries(b); err != nil || c != want {
		return g, fmt.Errorf("%s: GET /connections lists %d entries, want %d (%v)", r.name, c, want, err)
	}
	times := make([]time.Duration, n)
	for i := range times {
		at := time.Now()
		if _, err := get(url); err != nil {
			return g, err
		}
		times[i] = time.Since(at)
	}
	slices.Sort(times)
	g.median, g.fastest = times[n/2], times[0]

	// Allocation: the counts across n calls, less what reading the counts
	// costs (two readings in a row).
	a0, m0, err := memStats(r.prof)
	if err != nil {
		return g, nil
	}
	a1, m1, _ := memStats(r.prof)
	for range n {
		if _, err := get(url); err != nil {
			return g, err
		}
	}
	a2, m2, err := memStats(r.prof)
	if err != nil {
		return g, nil
	}
	readA, readM := float64(a1-a0), float64(m1-m0)
	g.allocBytes = max((float64(a2-a1)-readA)/float64(n), 0)
	g.mallocs = max((float64(m2-m1)-readM)/float64(n), 0)
	return g, nil
}

// changer moves `per` flows every second, each a 4-byte echo, rotating
// through the flows, until stop.
type changer struct {
	stop chan struct{}
	done chan struct{}
	errs []error
}

func startChanger(conns []net.Conn, per int) *changer {
	c := &changer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		next := 0
		for {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for k := range per {
				conn := conns[(next+k*(len(conns)/per+1))%len(conns)]
				wg.Go(func() {
					if err := ping(conn); err != nil {
						mu.Lock()
						c.errs = append(c.errs, err)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			next++
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *changer) end() error {
	close(c.stop)
	<-c.done
	return errors.Join(c.errs...)
}

// subscriber reads a WebSocket stream and discards it.
type subscriber struct {
	ws              *websocket.Conn
	done            chan struct{}
	messages, bytes atomic.Int64
}

func subscribe(url string) (*subscriber, error) {
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	s := &subscriber{ws: ws, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				return
			}
			n, err := io.Copy(io.Discard, r)
			if err != nil {
				return
			}
			s.messages.Add(1)
			s.bytes.Add(n)
		}
	}()
	return s, nil
}

func (s *subscriber) close() { s.ws.Close(); <-s.done }

// cpuOver is the router's CPU time per second over a window of d.
func cpuOver(pid int, d time.Duration) (time.Duration, error) {
	c0, err := threadsCPU(pid)
	if err != nil {
		return 0, err
	}
	at := time.Now()
	time.Sleep(d)
	c1, err := threadsCPU(pid)
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(c1-c0) / time.Since(at).Seconds()), nil
}

// streamFigures is a stream's cost: the router's CPU per second above the
// same windows without a subscriber (medians over the rounds) divided by
// the subscribers, and what it sent to one per second.
type streamFigures struct {
	name           string
	subs           int           // subscribers at once; cpu is per subscriber
	cpu, baseline  time.Duration // per second
	bytesPerSecond float64
	messagesPerSec float64
}

// stream is a stream to measure, with subs subscribers at once (the
// figures are per subscriber).
type stream struct {
	path string
	subs int
}

// measureStreams alternates, round after round (after one window it
// does not count), a window without a subscriber and one window with each
// stream, all while the changer moves flows.
func measureStreams(r *router, streams []stream, rounds int, window time.Duration) ([]streamFigures, error) {
	paths := make([]string, len(streams))
	for i, s := range streams {
		paths[i] = s.path
	}
	base := make([]time.Duration, 0, rounds)
	with := make([][]time.Duration, len(paths))
	out := make([]streamFigures, len(paths))
	for i := range out {
		out[i].name = paths[i]
	}
	// A window first, not counted: what opening the flows and the calls
	// before left to collect is collected meanwhile.
	if _, err := cpuOver(r.pid(), window); err != nil {
		return nil, err
	}
	for range rounds {
		c, err := cpuOver(r.pid(), window)
		if err != nil {
			return nil, err
		}
		base = append(base, c)
		for i, st := range streams {
			subs := make([]*subscriber, st.subs)
			for k := range subs {
				s, err := subscribe("ws://" + r.api + st.path)
				if err != nil {
					return nil, err
				}
				subs[k] = s
			}
			time.Sleep(1500 * time.Millisecond) // past the first message (the full table)
			s := subs[0]
			m0, b0, at := s.messages.Load(), s.bytes.Load(), time.Now()
			c, err := cpuOver(r.pid(), window)
			m1, b1, secs := s.messages.Load(), s.bytes.Load(), time.Since(at).Seconds()
			for _, s := range subs {
				s.close()
			}
			if err != nil {
				return nil, err
			}
			with[i] = append(with[i], c)
			out[i].subs = st.subs
			out[i].bytesPerSecond += float64(b1-b0) / secs / float64(rounds)
			out[i].messagesPerSec += float64(m1-m0) / secs / float64(rounds)
		}
	}
	slices.Sort(base)
	for i := range out {
		slices.Sort(with[i])
		out[i].baseline = base[len(base)/2]
		out[i].cpu = max(with[i][len(with[i])/2]-out[i].baseline, 0) / time.Duration(out[i].subs)
	}
	return out, nil
}
