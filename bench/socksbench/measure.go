package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"switchyard/bench/internal/benchkit"
	"sync"
	"sync/atomic"
	"time"
)

// target is one proxy under test: its SOCKS5 listen address and the pid
// whose RSS and CPU time are read.
type target struct {
	name string
	addr string
	pid  int
}

const (
	dialTimeout = 5 * time.Second
	ioTimeout   = 10 * time.Second
)

// bulkResult is one bulk run: the rate at the receiving end over the
// measured window (after the warm-up), and the proxy's CPU use meanwhile.
type bulkResult struct {
	MiBps  float64
	CPU    float64 // proxy CPU seconds per wall second (1.0 = one core busy)
	Other  float64 // CPU of everything but the proxy and the harness, in cores
	Errors int64   // streams that ended early
}

// measureBulk runs streams concurrent connections through t, each moving
// data one way as fast as it can: to the sink when up, from the source
// otherwise. Bytes are counted where they arrive, so data still in socket
// buffers is not counted as moved.
func measureBulk(t target, s *servers, up bool, streams int, warm, dur time.Duration) (bulkResult, error) {
	dst := s.source
	if up {
		dst = s.sink
	}
	conns := make([]net.Conn, 0, streams)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range streams {
		c, err := dialSOCKS(t.addr, dst, dialTimeout)
		if err == nil && s.clientTLS != nil {
			c, err = tlsHandshake(c, s.clientTLS)
		}
		if err != nil {
			closeAll()
			return bulkResult{}, err
		}
		conns = append(conns, c)
	}

	var (
		got    atomic.Int64 // download: bytes the client has read
		stop   atomic.Bool
		errs   atomic.Int64
		wg     sync.WaitGroup
		failed = func() {
			if !stop.Load() {
				errs.Add(1)
			}
		}
	)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bulkBuf)
			if up {
				fill(buf)
				for !stop.Load() {
					if _, err := c.Write(buf); err != nil {
						failed()
						return
					}
				}
				return
			}
			for {
				n, err := c.Read(buf)
				got.Add(int64(n))
				if err != nil {
					failed()
					return
				}
			}
		}()
	}
	counter := func() int64 {
		if up {
			return s.sunk.Load()
		}
		return got.Load()
	}

	time.Sleep(warm)
	c0, m, t0 := counter(), markCPU(t.pid), time.Now()
	time.Sleep(dur)
	c1, t1 := counter(), time.Now()
	cpu, other := loadSince(m, t.pid)
	stop.Store(true)
	closeAll()
	wg.Wait()
	s.waitDrained(5 * time.Second)

	secs := t1.Sub(t0).Seconds()
	return bulkResult{
		MiBps:  float64(c1-c0) / secs / (1 << 20),
		CPU:    cpu,
		Other:  other,
		Errors: errs.Load(),
	}, nil
}

// rateResult is one connection-rate run.
type rateResult struct {
	PerSec   float64
	P50, P99 time.Duration // connect-to-first-byte of the reply
	Count    int
	CPU      float64
	Other    float64
	Errors   int64
	FirstErr string
}

// measureRate runs workers loops, each: dial the proxy, SOCKS5 CONNECT to
// the request/reply server, send a small request, read the reply, close.
// Latency is from the start of the dial to the first byte of the reply.
// Only exchanges completing inside the measured window are counted.
func measureRate(t target, s *servers, workers int, warm, dur time.Duration) rateResult {
	var (
		stop      atomic.Bool
		measuring atomic.Bool
		errs      atomic.Int64
		firstErr  atomic.Pointer[string]
		wg        sync.WaitGroup
		lats      = make([][]time.Duration, workers)
	)
	var req [reqSize]byte
	fill(req[:])
	fail := func(err error) {
		if stop.Load() {
			return
		}
		if measuring.Load() {
			errs.Add(1)
		}
		msg := err.Error()
		firstErr.CompareAndSwap(nil, &msg)
		time.Sleep(5 * time.Millisecond) // no hot loop on a failing proxy
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			reply := make([]byte, replySize)
			for !stop.Load() {
				start := time.Now()
				c, err := dialSOCKS(t.addr, s.reqrep, dialTimeout)
				if err != nil {
					fail(err)
					continue
				}
				c.SetDeadline(time.Now().Add(ioTimeout))
				if _, err := c.Write(req[:]); err != nil {
					c.Close()
					fail(err)
					continue
				}
				n, err := c.Read(reply)
				first := time.Since(start)
				if err == nil && n < replySize {
					_, err = io.ReadFull(c, reply[n:])
				}
				c.Close()
				if err != nil {
					fail(err)
					continue
				}
				if measuring.Load() {
					lat = append(lat, first)
				}
			}
			lats[w] = lat
		}()
	}
	time.Sleep(warm)
	measuring.Store(true)
	m, t0 := markCPU(t.pid), time.Now()
	time.Sleep(dur)
	measuring.Store(false)
	t1 := time.Now()
	cpu, other := loadSince(m, t.pid)
	stop.Store(true)
	wg.Wait()
	s.waitDrained(5 * time.Second)

	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	secs := t1.Sub(t0).Seconds()
	r := rateResult{
		PerSec: float64(len(all)) / secs,
		Count:  len(all),
		CPU:    cpu,
		Other:  other,
		Errors: errs.Load(),
		P50:    percentile(all, 0.50),
		P99:    percentile(all, 0.99),
	}
	if p := firstErr.Load(); p != nil {
		r.FirstErr = *p
	}
	return r
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// memBatch is one batch of idle connections opened on top of what was open.
type memBatch struct {
	Conns          int
	Before, After  int64   // VmRSS, KiB
	PerConnKiB     float64 // (After-Before)/Conns
	FDsPerConn     float64 // growth of the proxy's open descriptors per connection; 0 if unknown
	SettledWithin  time.Duration
	Failed         int
	FirstErr       string
	ServerSideOpen int64
}

// measureMem opens batches of conns idle connections through t, one batch on
// top of the other, and reads the proxy's RSS after each has settled. Every
// connection completes one byte each way first, so the proxy's relay is
// running when it goes idle. All are closed at the end. A further batch is
// skipped, with skipped set, when the descriptors the proxy needed per
// connection so far say it would not fit under the proxy's limit.
func measureMem(t target, s *servers, conns, batches int) (out []memBatch, skipped string, err error) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
		s.waitDrained(10 * time.Second)
	}()
	before, _, err := settledRSS(t.pid)
	if err != nil {
		return nil, "", err
	}
	fds := procFDs(t.pid)
	for k := range batches {
		if k > 0 && fds > 0 {
			per := out[k-1].FDsPerConn
			if limit := procFDLimit(t.pid); limit > 0 && per > 0 &&
				float64(fds)+per*float64(conns) > 0.95*float64(limit) {
				skipped = fmt.Sprintf("batch %d skipped: it would take the proxy to about %.0f open descriptors, its limit is %d",
					k+1, float64(fds)+per*float64(conns), limit)
				break
			}
		}
		opened, failed, firstErr := openIdle(t, s, conns)
		held = append(held, opened...)
		after, took, err := settledRSS(t.pid)
		if err != nil {
			return out, skipped, err
		}
		b := memBatch{
			Conns:          len(opened),
			Before:         before,
			After:          after,
			SettledWithin:  took,
			Failed:         failed,
			FirstErr:       firstErr,
			ServerSideOpen: s.live[srvHold].Load(),
		}
		fdsAfter := procFDs(t.pid)
		if len(opened) > 0 {
			b.PerConnKiB = float64(after-before) / float64(len(opened))
			if fds > 0 && fdsAfter > 0 {
				b.FDsPerConn = float64(fdsAfter-fds) / float64(len(opened))
			}
		}
		out = append(out, b)
		if len(opened) == 0 {
			return out, skipped, fmt.Errorf("no connection opened: %s", firstErr)
		}
		before, fds = after, fdsAfter
	}
	return out, skipped, nil
}

// openIdle opens n connections through t to the hold server, 32 at a time.
func openIdle(t target, s *servers, n int) (opened []net.Conn, failed int, firstErr string) {
	const par = 32
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := openOneIdle(t, s)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == "" {
						firstErr = err.Error()
					}
				} else {
					opened = append(opened, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return opened, failed, firstErr
}

func openOneIdle(t target, s *servers) (net.Conn, error) {
	c, err := dialSOCKS(t.addr, s.hold, dialTimeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	b := []byte{'x'}
	if _, err := c.Write(b); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, b); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// settledRSS waits at least a second, then samples the RSS every half second
// until two successive samples differ by at most 0.5% (or 15 s pass), and
// returns the last sample in KiB.
func settledRSS(pid int) (int64, time.Duration, error) {
	start := time.Now()
	time.Sleep(time.Second)
	prev, err := procRSS(pid)
	if err != nil {
		return 0, 0, err
	}
	for time.Since(start) < 15*time.Second {
		time.Sleep(500 * time.Millisecond)
		cur, err := procRSS(pid)
		if err != nil {
			return 0, 0, err
		}
		d := cur - prev
		if d < 0 {
			d = -d
		}
		prev = cur
		if d*200 <= cur {
			break
		}
	}
	return prev, time.Since(start), nil
}

// procRSS reads VmRSS (KiB) from /proc/<pid>/status.
func procRSS(pid int) (int64, error) { return benchkit.ProcStatusKiB(pid, "VmRSS:") }

// procPeakRSS reads VmHWM (KiB) from /proc/<pid>/status: the largest
// resident set the process has had since it started.
func procPeakRSS(pid int) (int64, error) { return benchkit.ProcStatusKiB(pid, "VmHWM:") }

// procFDs counts the process's open descriptors, or returns 0 when
// /proc/<pid>/fd is unreadable.
func procFDs(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// procFDLimit is the process's soft RLIMIT_NOFILE from /proc/<pid>/limits,
// or 0 when unknown or unlimited.
func procFDLimit(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("Max open files"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 1 {
			return 0
		}
		n, _ := strconv.Atoi(string(f[0]))
		return n
	}
	return 0
}

// tlsHandshake runs TLS over a proxied connection (-tls), within
// dialTimeout; a failure closes c.
func tlsHandshake(c net.Conn, conf *tls.Config) (net.Conn, error) {
	tc := tls.Client(c, conf)
	tc.SetDeadline(time.Now().Add(dialTimeout))
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, fmt.Errorf("tls through the proxy: %w", err)
	}
	tc.SetDeadline(time.Time{})
	return tc, nil
}
