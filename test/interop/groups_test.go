package interop

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/group"
	"switchyard/netx"
	"switchyard/store"
	"switchyard/supervisor"
	"switchyard/test/socksclient"
)

// Groups over real Xray servers: a urltest group leaves a killed node after
// at most two failed flows and does not flap back when it returns, a UDP
// association skips a member that cannot carry UDP, and a selector switch
// interrupts the flows of the old choice and says how many.

// peerProc is a peer that a test can kill and start again on the same
// port.
type peerProc struct {
	t    *testing.T
	name string
	path string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	logs *logBuf
}

func startKillablePeer(t *testing.T, name, configJSON string, port int) *peerProc {
	t.Helper()
	p := &peerProc{t: t, name: name, port: port, path: filepath.Join(t.TempDir(), "config.json")}
	if err := os.WriteFile(p.path, []byte(configJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, p.logs)
		}
	})
	return p
}

func (p *peerProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(peers[p.name], "run", "-c", p.path)
	p.logs = &logBuf{}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(p.cmd, p.done)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited:\n%s", p.name, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not listening on %d:\n%s", p.name, p.port, p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *peerProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.done
	}
}

// probeServer answers the health probe (204) on loopback.
func probeServer(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(s.Close)
	return s.URL + "/generate_204"
}

// runConfig runs switchyard in-process with a whole configuration and
// returns it with its SOCKS5 inbound "socks-in".
func runConfig(t *testing.T, cfg string) (*supervisor.Supervisor, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("config:\n%s\n%v", cfg, err)
	}
	logs := &logBuf{}
	sv, err := supervisor.New(s, supervisor.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sv.Close()
		if t.Failed() {
			t.Logf("switchyard logs:\n%s", logs)
		}
	})
	return sv, sv.Addr("socks-in").String()
}

// twoNodes is a configuration whose SOCKS5 inbound (on listen) routes
// everything to the group tag of policy over socks outbounds "a" and "b"
// (Xray servers on portA and portB), probed with probeURL and no UDP
// probing. health goes into the [health] table, more into the group's.
func twoNodes(listen, probeURL, health string, portA, portB int, tag, policy, more string) string {
	return fmt.Sprintf(`
[health]
tcp_check_url = [%q]
udp_check_dns = []
%s

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = %q

[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:%d"

[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:%d"

[[groups]]
tag = %q
policy = %q
members = ["a", "b"]
%s

[route]
final = %q
`, probeURL, health, listen, portA, portB, tag, policy, more, tag)
}

func xraySocks(port int) string { return proxyInbound("xray", "socks", port, false) }

// waitMeasured waits until every candidate of the group has a TCP average.
func waitMeasured(t *testing.T, sv *supervisor.Supervisor, tag string) group.Explanation {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e := sv.Groups().Explain(tag, netx.TCP, netx.V4)
		all := len(e.Candidates) > 0
		for _, c := range e.Candidates {
			all = all && c.Measured
		}
		if all {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not measured after 20s: %+v", tag, e)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// flowVia opens one flow through the proxy to echo, checks it carries
// bytes, and returns the leaf it went through (from the flow table), or ""
// and the error when it failed.
func flowVia(t *testing.T, sv *supervisor.Supervisor, proxy, echo string) (string, error) {
	t.Helper()
	c, err := socksclient.DialWithin(proxy, echo, "", "", 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil {
		return "", err
	}
	for _, f := range sv.Tracker().Flows() {
		if f.Network == netx.TCP && f.Destination.String() == echo {
			return strings.SplitN(f.Outbound, "@", 2)[0], nil
		}
	}
	return "", fmt.Errorf("flow not in the table")
}

func TestURLTestLeavesAKilledNodeAndDoesNotFlapBack(t *testing.T) {
	portA, portB := freePort(t), freePort(t)
	peerA := startKillablePeer(t, "xray", xraySocks(portA), portA)
	peerB := startKillablePeer(t, "xray", xraySocks(portB), portB)
	peersByTag := map[string]*peerProc{"a": peerA, "b": peerB}
	sv, proxy := runConfig(t, twoNodes("127.0.0.1:0", probeServer(t), `check_interval = "30s"`, portA, portB,
		"auto", "urltest", `tolerance = "200ms"`))
	echo := tcpEcho(t)
	e := waitMeasured(t, sv, "auto")
	pick := e.Leaf
	other := map[string]string{"a": "b", "b": "a"}[pick]
	if got, err := flowVia(t, sv, proxy, echo); err != nil || got != pick {
		t.Fatalf("before the kill: flow via %q (%v), the group picks %q", got, err, pick)
	}

	// The pick's server dies: flows move to the other node after at most
	// two failed flows, without waiting for a probe cycle.
	peersByTag[pick].kill()
	failed := 0
	for i := range 12 {
		got, err := flowVia(t, sv, proxy, echo)
		switch {
		case err != nil:
			failed++
			if failed > 2 {
				t.Fatalf("flow %d after the kill failed (%d failed): %v", i, failed, err)
			}
		case got != other:
			t.Fatalf("flow %d after the kill went via %s", i, got)
		}
	}
	t.Logf("%d failed flows after the kill", failed)

	// It comes back and is measured again: within tolerance the incumbent
	// stays (and the returning node still carries its strike, which only
	// real successes clear).
	peersByTag[pick].start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sv.ProbeNow()
		e := sv.Groups().Explain("auto", netx.TCP, netx.V4)
		back := false
		for _, c := range e.Candidates {
			back = back || (c.Member == pick && c.Eligible)
		}
		if back {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not back after 20s: %+v", pick, e)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range 10 {
		if got, err := flowVia(t, sv, proxy, echo); err != nil || got != other {
			t.Fatalf("flow %d after %s came back: via %q (%v), want %s kept", i, pick, got, err, other)
		}
	}
}

// A UDP association routed through a group whose first member cannot
// carry UDP (an HTTP proxy) goes to the second.
func TestUDPThroughAGroupSkipsAMemberWithoutUDP(t *testing.T) {
	portH, portS := freePort(t), freePort(t)
	startPeer(t, "xray", proxyInbound("xray", "http", portH, false), portH)
	startPeer(t, "xray", xraySocks(portS), portS)
	sv, proxy := runConfig(t, fmt.Sprintf(`
[health]
tcp_check_url = [%q]
udp_check_dns = []

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
udp = true

[[outbounds]]
tag = "h"
type = "http"
server = "127.0.0.1:%d"

[[outbounds]]
tag = "s"
type = "socks"
server = "127.0.0.1:%d"

[[groups]]
tag = "fb"
policy = "fallback"
members = ["h", "s"]

[route]
final = "fb"
`, probeServer(t), portH, portS))
	if got, err := flowVia(t, sv, proxy, tcpEcho(t)); err != nil || got != "h" {
		t.Fatalf("TCP goes to the first member: via %q (%v)", got, err)
	}
	echoU := udpEcho(t, "p0:")
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ok := false
	for try := 0; try < 3 && !ok; try++ {
		a.Send(echoU, []byte("hello"))
		_, _, ok = a.Recv(2 * time.Second)
	}
	if !ok {
		t.Fatal("no UDP reply through the group")
	}
	var leaves []string
	for _, f := range sv.Tracker().Flows() {
		if f.Network == netx.UDP {
			leaves = append(leaves, f.Outbound)
		}
	}
	if len(leaves) == 0 {
		t.Fatal("no UDP sub-link in the table")
	}
	for _, l := range leaves {
		if !strings.HasPrefix(l, "s@") {
			t.Fatalf("a UDP sub-link on %s, want s", l)
		}
	}
}

// Switching a selector interrupts the flows through the old choice, and
// the write says how many once they are closed; flows through the new
// choice are left alone.
func TestASelectorSwitchInterruptsTheOldChoicesFlows(t *testing.T) {
	portA, portB := freePort(t), freePort(t)
	startPeer(t, "xray", xraySocks(portA), portA)
	startPeer(t, "xray", xraySocks(portB), portB)
	sv, proxy := runConfig(t, twoNodes("127.0.0.1:0", probeServer(t), "", portA, portB, "pick", "selector", ""))
	echo := tcpEcho(t)
	var conns []net.Conn
	for range 3 {
		c, err := socksclient.Dial(proxy, echo, "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	n, err := sv.SelectGroup("pick", "b")
	if err != nil || n != 3 {
		t.Fatalf("switch: %d interrupted (%v), want 3", n, err)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("flow %d through the old choice still open", i)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("flow %d through the old choice not closed", i)
		}
	}
	if got, err := flowVia(t, sv, proxy, echo); err != nil || got != "b" {
		t.Fatalf("after the switch: via %q (%v)", got, err)
	}
	// Switching back closes the flow through b only (once the flow above
	// has left the table).
	waitFlows(t, sv, 0)
	c, err := socksclient.Dial(proxy, echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := sv.SelectGroup("pick", "a"); err != nil || n != 1 {
		t.Fatalf("switch back: %d interrupted (%v), want 1", n, err)
	}
}

// waitFlows waits until the flow table holds n TCP flows.
func waitFlows(t *testing.T, sv *supervisor.Supervisor, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := 0
		for _, f := range sv.Tracker().Flows() {
			if f.Network == netx.TCP {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d TCP flows in the table, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running is a supervisor started with its [state] store, stoppable as a
// process stops (the store closed after it).
type running struct {
	sv   *supervisor.Supervisor
	st   *store.Store
	once sync.Once
}

func (r *running) stop() {
	r.once.Do(func() {
		r.sv.Close()
		r.st.Close()
	})
}

// runConfigStore is runConfig with the configuration's [state] store
// opened as switchyard run opens it.
func runConfigStore(t *testing.T, cfg string) (*running, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switchyard.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("config:\n%s\n%v", cfg, err)
	}
	logs := &logBuf{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := &running{st: store.Open(s.State.Path, log)}
	r.sv, err = supervisor.New(s, supervisor.Options{Logger: log, Store: r.st})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.sv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			t.Logf("switchyard logs:\n%s", logs)
		}
	})
	return r, r.sv.Addr("socks-in").String()
}
