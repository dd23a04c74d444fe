package balancer_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/balancer"
	"switchyard/netx"
	"switchyard/plane"
)

const (
	interval = 50 * time.Millisecond
	timeout  = 200 * time.Millisecond
)

// probed builds a failover balancer over one member per probe address,
// tagged a, b, c... in order, logging to l.
func probed(t *testing.T, l *logs, probes ...netx.Addr) *balancer.Balancer {
	t.Helper()
	ms := make([]balancer.Member, len(probes))
	for i, p := range probes {
		ms[i] = balancer.Member{Target: plane.NewTarget(id(string(rune('a'+i))), nil), Probe: p}
	}
	b, err := balancer.New("pool", ms, balancer.Failover, slogOf(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

func TestProbesFollowAnUpstreamThatGoesAwayAndComesBack(t *testing.T) {
	live := listen(t, "127.0.0.1:0")
	dead := closedPort(t)
	var l logs
	b := probed(t, &l, live.addr(), dead)
	b.SetHealthy(0, false) // so that the probe has to bring it up
	b.StartProbes(context.Background(), interval, timeout, netx.SystemResolver{}, plainDialer())

	l.wait(t, "balancer member a is now up", 1)
	l.wait(t, "balancer member b is now down", 1)
	time.Sleep(4 * interval)
	if !b.Healthy(0) || l.count("balancer member a is now down") != 1 {
		t.Fatalf("the live upstream did not stay up; logged:\n%s", &l)
	}
	if b.Healthy(1) || b.Select().ID().Tag != "a" {
		t.Fatalf("the closed port is not down")
	}
	within(t, 5*time.Second, "the probe's connection closed at once", func() bool { return live.closedByPeer.Load() > 0 })

	listen(t, dead.String())
	l.wait(t, "balancer member b is now up", 1)
	if !b.Healthy(1) {
		t.Fatal("b is not up after its upstream came back")
	}
}

func TestAClosedPortGoesDownWithinOneInterval(t *testing.T) {
	var l logs
	b := probed(t, &l, closedPort(t))
	start := time.Now()
	// The interval is long: only the first probe, run at once, can see it.
	b.StartProbes(context.Background(), time.Hour, timeout, netx.SystemResolver{}, plainDialer())
	l.wait(t, "balancer member a is now down", 1)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("down after %v", d)
	}
}

func TestStoppedProbesRecordNothing(t *testing.T) {
	live := listen(t, "127.0.0.1:0")
	var l logs
	b := probed(t, &l, live.addr())
	b.StartProbes(context.Background(), interval, timeout, netx.SystemResolver{}, plainDialer())
	within(t, 5*time.Second, "a first probe", func() bool { return live.closedByPeer.Load() > 0 })
	b.Stop()
	live.close()
	time.Sleep(4 * interval)
	if !b.Healthy(0) || l.count("balancer member a is now down") != 0 {
		t.Fatalf("a stopped balancer still probes; logged:\n%s", &l)
	}
}

func TestAProbeUsesTheDialersSocketPolicy(t *testing.T) {
	live := listen(t, "127.0.0.1:0")
	var h hooked
	var l logs
	b := probed(t, &l, live.addr())
	b.SetHealthy(0, false)
	b.StartProbes(context.Background(), interval, timeout, netx.SystemResolver{}, netx.NewDialer(netx.SocketPolicy{Hook: h.hook}, time.Second))
	l.wait(t, "balancer member a is now up", 1)
	s := h.sockets()
	if len(s) == 0 || s[0].Network != "tcp4" || s[0].Address != live.addr().String() || s[0].FD == 0 {
		t.Fatalf("the hook saw %+v", s)
	}

	refusing := &hooked{refuse: errors.New("the platform refused to protect the socket")}
	var rl logs
	r := probed(t, &rl, live.addr())
	r.StartProbes(context.Background(), interval, timeout, netx.SystemResolver{}, netx.NewDialer(netx.SocketPolicy{Hook: refusing.hook}, time.Second))
	rl.wait(t, "balancer member a is now down", 1)
	if len(refusing.sockets()) == 0 || r.Healthy(0) {
		t.Fatal("a refused probe socket did not mark the member down")
	}
}

func TestAProbeResolvesANameAndTriesEachAddressInTurn(t *testing.T) {
	live := listen(t, "127.0.0.1:0")
	port := live.addr().Port
	res := &staticResolver{ips: map[string][]netip.Addr{
		// Nothing listens on 127.0.0.2: the probe must move on to 127.0.0.1.
		"upstream.test": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")},
	}}
	var h hooked
	var l logs
	b := probed(t, &l, netx.DomainAddr("upstream.test", port), netx.DomainAddr("nowhere.test", port))
	b.SetHealthy(0, false)
	b.StartProbes(context.Background(), interval, timeout, res, netx.NewDialer(netx.SocketPolicy{Hook: h.hook}, time.Second))
	l.wait(t, "balancer member a is now up", 1)
	l.wait(t, "balancer member b is now down", 1)
	q := res.questions()
	if !slices.Contains(q, "upstream.test") || !slices.Contains(q, "nowhere.test") {
		t.Fatalf("the resolver was asked %v", q)
	}
	var tried []string
	for _, s := range h.sockets() {
		if netip.MustParseAddrPort(s.Address).Port() == port && !slices.Contains(tried, s.Address) {
			tried = append(tried, s.Address)
		}
	}
	want := []string{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port).String(), live.addr().String()}
	if !slices.Equal(tried, want) {
		t.Fatalf("probe sockets went to %v, want %v in that order", tried, want)
	}
}

func TestTheTimeoutBoundsAHungResolution(t *testing.T) {
	res := newHungResolver()
	var l logs
	b := probed(t, &l, netx.DomainAddr("hung.test", 443))
	start := time.Now()
	b.StartProbes(context.Background(), time.Hour, timeout, res, plainDialer())
	l.wait(t, "balancer member a is now down", 1)
	if d := time.Since(start); d < timeout || d > 3*time.Second {
		t.Fatalf("a hung resolution counted as down after %v with a %v timeout", d, timeout)
	}
	if err := <-res.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the resolution ended with %v", err)
	}
	start = time.Now()
	b.Stop() // during the hour-long sleep
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Stop waited %v for a sleeping probe", d)
	}
}

func TestStopAbandonsAProbeInFlight(t *testing.T) {
	res := newHungResolver()
	var l logs
	b := probed(t, &l, netx.DomainAddr("hung.test", 443), netx.DomainAddr("hung.test", 444))
	b.StartProbes(context.Background(), interval, time.Hour, res, plainDialer())
	<-res.entered
	<-res.entered
	b.Stop()
	for range 2 {
		select {
		case err := <-res.ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the abandoned resolution ended with %v", err)
			}
		default:
			t.Fatal("Stop returned while a probe was still resolving")
		}
	}
	if !b.Healthy(0) || !b.Healthy(1) || len(l.String()) != 0 {
		t.Fatalf("an abandoned probe was recorded; logged:\n%s", &l)
	}
}

func TestCancellingTheContextEndsEveryProbe(t *testing.T) {
	before := goleak.IgnoreCurrent()
	res := newHungResolver()
	var l logs
	b := probed(t, &l, netx.DomainAddr("hung.test", 443), netx.DomainAddr("hung.test", 444))
	ctx, cancel := context.WithCancel(context.Background())
	b.StartProbes(ctx, interval, time.Hour, res, plainDialer())
	<-res.entered
	<-res.entered
	cancel()
	goleak.VerifyNone(t, before)
	if !b.Healthy(0) || !b.Healthy(1) {
		t.Fatal("an abandoned probe was recorded")
	}
}

func TestStartingProbesAgainReplacesTheRunningOnes(t *testing.T) {
	first := newHungResolver()
	var l logs
	b := probed(t, &l, netx.DomainAddr("upstream.test", 443))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // runs before b.Stop, should the first probes be left running
	b.StartProbes(ctx, interval, time.Hour, first, plainDialer())
	<-first.entered
	second := &staticResolver{} // resolves nothing: the member goes down
	b.StartProbes(context.Background(), interval, timeout, second, plainDialer())
	select {
	case err := <-first.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the first probe ended with %v", err)
		}
	default:
		t.Fatal("the first probes still run")
	}
	l.wait(t, "balancer member a is now down", 1)
}
