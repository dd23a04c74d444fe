package netem

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/test/netem/netlab"
)

// Score against URLTest with two real Xray servers (issue 16, "End to end
// with real servers"): node A on a short path whose routing blackholes
// some sites (a target-path failure behind a working proxy), node B over a
// delayed link serving every site (netlab.ScoreLab has the picture).
//
// The same flows run twice, once through a URLTest group over [A, B] and
// once through a Score group over [A, B]: from a cold start, with no
// lead-in of history on A, scoreRounds rounds to every site (open and
// blocked sites alternating), each round one new flow (a new connection
// to the mixed inbound, a GET) per site. Which node carried a
// flow is read from the servers' side: each node reaches the sites from
// an address of its own and the sites record every request's source; a
// blackholed flow reaches no site, and switchyard's flow table
// (/connections, read while the flow is open) names the node it was on;
// both servers' access logs must agree. Asserted:
//
//   - URLTest: every flow went through A (the faster probe), every flow
//     to an open site succeeded and every flow to a blocked site failed,
//     on A (A's access log shows each one blackholed), every round.
//   - Score: some flow to a blocked site failed on A, and in the last
//     scoreSettled rounds every flow to a blocked site succeeds through B
//     but at most one (a budgeted trial of A); the flows to the open sites
//     all succeed in those rounds, through A for most of each site's and
//     for at least three quarters of them all (trials of B take the rest).
//
// URLTest fails the Score assertions (its blocked sites never succeed),
// and so does a policy that moves everything to B.
//
// The per-site success rate and median time to the first byte of both
// runs are logged as a table (bench/score writes the same table).
func TestScoreMovesBlockedTargetsOffTheNodeThatFailsThem(t *testing.T) {
	lab := newScoreLab(t)
	t.Logf("node A: Xray at %s (loopback), blackholes %s; node B: Xray at %s over %s, %v each way (RTT %v); sites on %s",
		lab.NodeA, strings.Join(lab.Blocked, ", "), lab.NodeB, lab.Path.Mode, lab.Path.Delay, lab.Path.RTT(), lab.Path.HostAddr)

	ut, utAccess := runLabPolicy(t, lab, "urltest")
	logFirstFailure(t, ut)
	checkURLTest(t, ut.Summary(lab.AllSites()), utAccess)
	if out, ok := check(t, lab.SwitchyardConfig("score", "127.0.0.1:0", 1, scoreCheckInterval)); !ok {
		t.Logf("\n%s", netlab.LabTable(lab.AllSites(), ut))
		t.Fatalf("this build's loader refuses policy = \"score\" (no Score to measure):\n%s", out)
	}
	sc, scAccess := runLabPolicy(t, lab, "score")
	t.Logf("success rate and median time to the first byte per site, %d rounds from a cold start:\n%s", scoreRounds, netlab.LabTable(lab.AllSites(), ut, sc))
	logFirstFailure(t, sc)
	checkScore(t, sc, scAccess)
}

const (
	scoreDelay         = 50 * time.Millisecond // node B's link, each way
	scoreOpen          = 4                     // sites both nodes serve
	scoreBlocked       = 2                     // sites node A blackholes
	scoreRounds        = 12                    // then rounds to every site
	scoreSettled       = 6                     // the last rounds, where Score must have settled
	scoreFlowTimeout   = 10 * time.Second
	scoreCheckInterval = 10 * time.Second
)

// newScoreLab builds the lab for one test and takes it down when the test
// ends, failed or not; the servers' logs are shown on a failure.
func newScoreLab(t *testing.T) *netlab.ScoreLab {
	t.Helper()
	lab, err := netlab.NewScoreLab(netlab.ScoreLabConfig{Xray: xray, Dir: t.TempDir(), Delay: scoreDelay, Open: scoreOpen, Blocked: scoreBlocked})
	if err != nil {
		t.Fatalf("building the lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("xray logs:\n%s", lab.Logs())
		}
		if err := lab.Close(); err != nil {
			t.Errorf("taking the lab down: %v", err)
		}
	})
	return lab
}

// runLabPolicy runs switchyard with the lab's group under policy, waits
// until both nodes are probed, drives the flows and stops it.
// It returns the flows and what the servers' access logs said of them.
func runLabPolicy(t *testing.T, lab *netlab.ScoreLab, policy string) (*netlab.LabRun, map[string]access) {
	t.Helper()
	api := freePort(t)
	sy := startSwitchyard(t, lab.SwitchyardConfig(policy, "127.0.0.1:0", api, scoreCheckInterval))
	sy.api = fmt.Sprintf("127.0.0.1:%d", api)
	defer sy.Stop()
	if err := netlab.WaitProbed(sy.api, []string{netlab.OutboundA, netlab.OutboundB}, 30*time.Second); err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	before := accessCounts(lab)
	start := time.Now()
	run := lab.Drive(policy, policy, sy.addr(netlab.LabInbound), sy.api, 0, scoreRounds, scoreFlowTimeout, 0)
	t.Logf("%s: %d flows in %v", policy, len(run.Flows), time.Since(start).Round(time.Millisecond))
	if policy == "score" {
		stats, err := netlab.ScoreReasons(sy.api)
		t.Logf("score: the engine's counters after the flows (%v):\n%s", err, stats)
	}
	for _, n := range []string{netlab.OutboundA, netlab.OutboundB} {
		d, err := netlab.ProbeLatency(sy.api, n)
		t.Logf("%s: %s's latest probe latency %v (%v)", policy, n, d, err)
	}
	time.Sleep(200 * time.Millisecond) // Xray's access log is written asynchronously
	after := accessCounts(lab)
	var lines []string
	delta := map[string]access{}
	for _, site := range lab.AllSites() {
		d := after[site].minus(before[site])
		delta[site] = d
		lines = append(lines, fmt.Sprintf("%s: A accepted %d (blackholed %d), B accepted %d", site, d.a, d.hole, d.b))
	}
	t.Logf("%s, the servers' access logs:\n%s", policy, strings.Join(lines, "\n"))
	return run, delta
}

// logFirstFailure says what a client sees of a blackholed flow.
func logFirstFailure(t *testing.T, run *netlab.LabRun) {
	t.Helper()
	for _, f := range run.Flows {
		if f.Err != nil {
			t.Logf("%s, a flow to a site node A blocks (chain %q): %v, after %v", run.Policy, f.Chain, f.Err, f.Elapsed.Round(time.Millisecond))
			return
		}
	}
}

func checkURLTest(t *testing.T, sum []netlab.SiteSummary, logs map[string]access) {
	t.Helper()
	for _, s := range sum {
		if l := logs[s.Site]; l.a != s.Flows || l.b != 0 || (s.Blocked && l.hole != s.Flows) {
			t.Errorf("urltest, %s: %d flows, yet A's access log accepted %d (blackholed %d) and B's %d", s.Site, s.Flows, l.a, l.hole, l.b)
		}
		if s.ViaB > 0 {
			t.Errorf("urltest, %s: node B carried %d flows (%s); URLTest sends everything to A, the fastest probe", s.Site, s.ViaB, s.Sequence)
		}
		switch {
		case !s.Blocked && s.OK != s.Flows:
			t.Errorf("urltest, %s: %d of %d flows to a site both nodes serve succeeded (%s)", s.Site, s.OK, s.Flows, s.Sequence)
		case s.Blocked && s.OK != 0:
			t.Errorf("urltest, %s: %d of %d flows to a site A blocks succeeded (%s); they stay on A and fail", s.Site, s.OK, s.Flows, s.Sequence)
		case s.Blocked && s.FailedA != s.Flows:
			t.Errorf("urltest, %s: the flow table put %d of its %d failed flows on A", s.Site, s.FailedA, s.Flows)
		}
	}
}

func checkScore(t *testing.T, run *netlab.LabRun, logs map[string]access) {
	t.Helper()
	settledFrom := scoreRounds - scoreSettled
	bySite := map[string][]netlab.LabFlow{}
	var sites []string
	for _, f := range run.Flows {
		if _, ok := bySite[f.Site]; !ok {
			sites = append(sites, f.Site)
		}
		bySite[f.Site] = append(bySite[f.Site], f)
	}
	failedAtA := 0
	var openFlows, openViaA int
	for _, s := range run.Summary(sites) {
		// Every flow reached one server; a blackholed one only A.
		if l := logs[s.Site]; l.a+l.b != s.Flows || l.a-l.hole != s.ViaA || l.b != s.ViaB {
			t.Errorf("score, %s: %d flows, %d served by A and %d by B, yet A's access log accepted %d (blackholed %d) and B's %d",
				s.Site, s.Flows, s.ViaA, s.ViaB, l.a, l.hole, l.b)
		}
		var n, ok, viaA, viaB int // in the settled rounds
		for _, f := range bySite[s.Site] {
			if f.Round < settledFrom {
				continue
			}
			n++
			if f.Err == nil {
				ok++
				switch f.Carrier {
				case "A":
					viaA++
				case "B":
					viaB++
				}
			}
		}
		if s.Blocked {
			failedAtA += s.FailedA
			// Moved: the later flows succeed, through B; at most one of
			// them may be a budgeted trial of A that fails again.
			if ok < n-1 || viaB != ok {
				t.Errorf("score, %s (blocked at A): in the last %d rounds %d flows succeeded, %d through B; want all but at most one, all through B (flows: %s)",
					s.Site, n, ok, viaB, s.Sequence)
			}
			continue
		}
		// Kept: every flow succeeds, and A, the faster node, carries most
		// of them; budgeted trials of B may take a few.
		openFlows, openViaA = openFlows+n, openViaA+viaA
		if ok != n || viaA*2 <= n {
			t.Errorf("score, %s (served by both): in the last %d rounds %d flows succeeded, %d through A; want all, most through A (flows: %s)",
				s.Site, n, ok, viaA, s.Sequence)
		}
	}
	defer func() {
		if !t.Failed() {
			return
		}
		var lines []string
		for _, s := range run.Summary(sites) {
			lines = append(lines, fmt.Sprintf("%s: %s", s.Site, s.Reasons))
		}
		t.Logf("score, each site's flows in order, by carrier (x: failed), with the Score counters each moved:\n%s", strings.Join(lines, "\n"))
	}()
	if failedAtA == 0 {
		t.Errorf("score: no flow to a site A blocks failed on A; the run did not test a move")
	}
	if openViaA*4 < openFlows*3 {
		t.Errorf("score: A carried %d of the last %d rounds' %d flows to the sites both serve; want at least three quarters", openViaA, scoreSettled, openFlows)
	}
}

// access is what the two servers' access logs say of one site.
type access struct{ a, hole, b int }

func (x access) minus(y access) access { return access{x.a - y.a, x.hole - y.hole, x.b - y.b} }

func accessCounts(lab *netlab.ScoreLab) map[string]access {
	m := map[string]access{}
	for _, site := range lab.AllSites() {
		var x access
		x.a, x.hole = lab.Access("a", site)
		x.b, _ = lab.Access("b", site)
		m[site] = x
	}
	return m
}
