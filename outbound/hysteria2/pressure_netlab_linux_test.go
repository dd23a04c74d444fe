package hysteria2

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"switchyard/internal/pressure"
	"switchyard/internal/pressure/pressuretest"
	"switchyard/netx"
	"switchyard/outbound/hysteria2/internal/hy2test"
	"switchyard/test/netem/netlab"
)

// discard is a loopback TCP server that reads and drops everything.
func discard(t *testing.T) netx.Addr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); io.Copy(io.Discard, c) }()
		}
	}()
	return netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
}

// serverBehind starts a Hysteria 2 server whose QUIC socket is inside p's
// namespace, so the client's connection crosses the path; the server
// reaches destinations from the root namespace.
func serverBehind(t *testing.T, p *netlab.Path) *testServer {
	t.Helper()
	var uc *net.UDPConn
	if err := p.Do(func() error {
		var err error
		uc, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.PeerAddr.AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := hy2test.StartOn(t, uc, hy2test.Options{})
	return &testServer{Server: s, addr: s.Addr, cert: testCert{cert: s.Cert.Certificate, caFile: s.Cert.CAFile}, sessions: &s.Sessions, lastTx: &s.LastTx}
}

// A real Hysteria 2 connection through a namespace whose link first adds a
// baseline delay, then more delay, then loss, then nothing: the QUIC
// connection's statistics (CarrierCounters) train the baseline, fire an
// RTT hint after three pressured intervals, hold the loss episode until
// 30 s after it and publish it then, and rearm after normal intervals.
func TestQUICStatisticsEpisodesOnARealConnection(t *testing.T) {
	t.Parallel()
	p, err := netlab.New(pressuretest.DefaultPlan.Base)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Logf("link: %s", p.Mode)
	srv := serverBehind(t, p)
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	if _, ok := o.CarrierCounters(); ok {
		t.Fatal("counters before any connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := o.DialStream(ctx, netx.Flow{Network: netx.TCP, Dst: discard(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ok := o.CarrierCounters()
	if !ok || c.Transmissions == 0 || c.RTT <= 0 || c.Family != netx.V4 {
		t.Fatalf("counters of the connection: %+v %v", c, ok)
	}
	stop := pressuretest.Upload(s)
	defer stop()
	pressuretest.Run(t, p, pressure.NewSource(o), pressuretest.DefaultPlan)
}
