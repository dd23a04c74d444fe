package supervisor

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// slowSocks is a SOCKS5 server that takes its time over each handshake and
// counts the handshakes it has in flight: from accept to its CONNECT reply.
type slowSocks struct {
	ln         net.Listener
	inFlight   atomic.Int32
	peak       atomic.Int32
	handshakes atomic.Int32
	wg         sync.WaitGroup
}

func newSlowSocks(t *testing.T, delay time.Duration) *slowSocks {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSocks{ln: ln}
	var mu sync.Mutex
	var conns []net.Conn
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			n := s.inFlight.Add(1)
			for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, delay)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *slowSocks) serve(c net.Conn, delay time.Duration) {
	defer c.Close()
	answered := false
	defer func() {
		if !answered {
			s.inFlight.Add(-1)
		}
	}()
	var b [262]byte
	if _, err := io.ReadFull(c, b[:2]); err != nil {
		return
	}
	if _, err := io.ReadFull(c, b[:b[1]]); err != nil {
		return
	}
	time.Sleep(delay)
	c.Write([]byte{5, 0})
	if _, err := io.ReadFull(c, b[:4]); err != nil {
		return
	}
	var rest int
	switch b[3] {
	case 1:
		rest = 4 + 2
	case 4:
		rest = 16 + 2
	case 3:
		if _, err := io.ReadFull(c, b[:1]); err != nil {
			return
		}
		rest = int(b[0]) + 2
	}
	if _, err := io.ReadFull(c, b[:rest]); err != nil {
		return
	}
	s.handshakes.Add(1)
	s.inFlight.Add(-1)
	answered = true
	c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	io.Copy(io.Discard, c)
}

// 200 concurrent first dials through a generation limited to 4: the server
// never sees more than 4 handshakes at once, every dial succeeds, and the
// admission counts show the waiters while they wait.
func TestAdmissionBoundsHandshakesInFlight(t *testing.T) {
	srv := newSlowSocks(t, 20*time.Millisecond)
	s := baseSpec()
	s.Dial.MaxConcurrentDials = 4
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "up", Type: "socks", Server: srv.ln.Addr().String(), AddressFamily: "auto"})
	s.Route.Final = "up"
	sv, _ := run(t, s, Options{Gate: netx.NewGate(64)})
	flow := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("dst.test", 80), Inbound: "socks-in"}
	var (
		wg         sync.WaitGroup
		fails      atomic.Int32
		maxWaiting atomic.Int64
	)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			gen, proc := sv.Admission()
			if gen.InUse > 4 || proc.InUse > 4 {
				t.Errorf("%d permits of the generation and %d of the process in use, limit 4", gen.InUse, proc.InUse)
			}
			if gen.Waiting > maxWaiting.Load() {
				maxWaiting.Store(gen.Waiting)
			}
		}
	}()
	var conns sync.Map
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := sv.conn.ConnectStream(context.Background(), flow)
			if err != nil {
				fails.Add(1)
				t.Log(err)
				return
			}
			conns.Store(i, c)
		}()
	}
	wg.Wait()
	close(stop)
	conns.Range(func(_, c any) bool { c.(net.Conn).Close(); return true })
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d of 200 dials failed", n)
	}
	if p := srv.peak.Load(); p > 4 || p < 2 {
		t.Fatalf("the server saw %d handshakes at once, want at most 4 (and the gate used)", p)
	}
	if srv.handshakes.Load() != 200 {
		t.Fatalf("%d handshakes completed, want 200", srv.handshakes.Load())
	}
	if maxWaiting.Load() == 0 {
		t.Fatal("no dial was ever seen waiting for admission")
	}
	gen, proc := sv.Admission()
	if gen.InUse != 0 || gen.Waiting != 0 || proc.InUse != 0 {
		t.Fatalf("after every dial: generation %+v, process %+v", gen, proc)
	}
}
