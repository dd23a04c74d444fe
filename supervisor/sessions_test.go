package supervisor

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// usersSpec is baseSpec with users on the SOCKS inbound and an HTTP
// inbound that has the same users.
func usersSpec(users ...spec.User) *spec.Spec {
	s := baseSpec()
	s.Inbounds[0].Users = users
	s.Inbounds = append(s.Inbounds, spec.Inbound{
		Tag: "http-in", Type: "http", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Users: users,
	})
	return s
}

// assoc is a SOCKS5 UDP association opened with a username and password.
type assoc struct {
	ctrl  net.Conn
	pc    *net.UDPConn
	relay *net.UDPAddr
}

func associateAs(t *testing.T, proxy, user, pass string) *assoc {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := socksclient.Greet(c, user, pass); err != nil {
		c.Close()
		t.Fatal(err)
	}
	bound, err := socksclient.Request(c, 3, "0.0.0.0", 0)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	relay, err := net.ResolveUDPAddr("udp", bound)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	a := &assoc{ctrl: c, pc: pc, relay: relay}
	t.Cleanup(a.close)
	return a
}

func (a *assoc) send(to net.Addr, payload []byte) {
	ap := to.(*net.UDPAddr).AddrPort()
	b := socksclient.AppendAddr([]byte{0, 0, 0}, ap.Addr().String(), ap.Port())
	a.pc.WriteToUDP(append(b, payload...), a.relay)
}

// recv returns the payload of one reply, nil after d.
func (a *assoc) recv(d time.Duration) []byte {
	a.pc.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 65535)
	n, _, err := a.pc.ReadFromUDP(b)
	if err != nil || n < 10 {
		return nil
	}
	return b[10:n] // an IPv4 header
}

func (a *assoc) close() { a.ctrl.Close(); a.pc.Close() }

// connectHTTP opens a CONNECT tunnel through the HTTP proxy as user.
func connectHTTP(t *testing.T, proxy, target, user, pass string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		c.Close()
		t.Fatalf("CONNECT through the http inbound: %v %v", resp, err)
	}
	c.SetReadDeadline(time.Time{})
	return &bufConn{Conn: c, r: br}
}

// bufConn reads what its reader buffered past the response first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// Three packets to two outbounds give two flows with exact byte counts, both
// filed under the SOCKS session, and their payload is charged to the
// session's wire: SOCKS datagrams never cross the session's TCP stream.
func TestAUDPAssociationCountsEachSubLinkAndChargesItsSession(t *testing.T) {
	one, two := udpEcho(t), udpEcho(t)
	s := usersSpec(spec.User{Username: "alice", Password: "pw"})
	s.Rules = []spec.Rule{{Port: []uint16{uint16(two.LocalAddr().(*net.UDPAddr).Port)}, Outbound: "direct2"}}
	sv, proxy := run(t, s, Options{})
	tr := sv.Tracker()
	a := associateAs(t, proxy, "alice", "pw")
	for _, p := range []struct {
		to   *net.UDPConn
		size int
	}{{one, 10}, {one, 20}, {two, 30}} {
		a.send(p.to.LocalAddr(), make([]byte, p.size))
		if got := a.recv(2 * time.Second); len(got) != p.size {
			t.Fatalf("reply of %d bytes: got %d", p.size, len(got))
		}
	}
	sessions := tr.Sessions()
	if len(sessions) != 1 || sessions[0].User != "alice" || sessions[0].Inbound != "socks-in" {
		t.Fatalf("sessions %+v, want alice's one on socks-in", sessions)
	}
	sess := sessions[0]
	var udp []string
	for _, f := range tr.Flows() {
		if f.Network != netx.UDP {
			continue
		}
		udp = append(udp, f.Outbound)
		if f.Up != 30 || f.Down != 30 || f.Session != sess.ID || f.User != "alice" {
			t.Errorf("%s: up %d down %d session %d user %q, want 30, 30, %d, alice", f.Outbound, f.Up, f.Down, f.Session, f.User, sess.ID)
		}
	}
	slices.Sort(udp)
	if !slices.Equal(udp, []string{"direct2@v1", "direct@v1"}) {
		t.Fatalf("UDP flows %v, want one per outbound", udp)
	}
	if sess.Up != 60 || sess.Down != 60 || sess.Flows != 2 {
		t.Fatalf("session wire up %d down %d with %d flows, want 60, 60 and 2", sess.Up, sess.Down, sess.Flows)
	}
	a.close()
	eventually(t, "the session ends with its control connection", func() bool { return len(tr.Sessions()) == 0 })
	if u, _ := tr.User("alice"); u.Up != 60 || u.Down != 60 || u.Sessions != 0 {
		t.Fatalf("alice %+v after the session, want 60 up and down", u)
	}
}

// A user's totals add up every flow of every session, whichever inbound it
// came on, and outlive them; a reload keeps them.
func TestUserTotalsAddUpTwoSessions(t *testing.T) {
	users := []spec.User{{Username: "alice", Password: "pw"}, {Username: "bob", Password: "pw"}}
	sv, proxy := run(t, usersSpec(users...), Options{})
	tr := sv.Tracker()
	echo := tcpEcho(t)
	c, err := socksclient.Dial(proxy, echo, "alice", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if err := echoOnce(c, "over socks"); err != nil {
		t.Fatal(err)
	}
	h := connectHTTP(t, sv.Addr("http-in").String(), echo, "alice", "pw")
	if err := echoOnce(h, "and over http, at the same time"); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, s := range tr.Sessions() {
		if s.User != "alice" {
			t.Errorf("a session of %q", s.User)
		}
		ids = append(ids, s.ID)
	}
	if len(ids) != 2 {
		t.Fatalf("%d sessions, want 2", len(ids))
	}
	for _, f := range tr.Flows() {
		if !slices.Contains(ids, f.Session) {
			t.Errorf("flow %d is filed under session %d, not one of %v", f.ID, f.Session, ids)
		}
	}
	c.Close()
	h.Close()
	eventually(t, "both sessions end", func() bool { return len(tr.Sessions()) == 0 })
	const want = int64(len("over socks") + len("and over http, at the same time"))
	if u, _ := tr.User("alice"); u.Up != want || u.Down != want {
		t.Fatalf("alice %+v, want %d bytes each way", u, want)
	}
	if b, _ := tr.User("bob"); b.Up != 0 || b.Down != 0 {
		t.Fatalf("bob %+v, want nothing", b)
	}
	if err := sv.Apply(usersSpec(users[0])); err != nil {
		t.Fatal(err)
	}
	us := tr.Users()
	if len(us) != 1 || us[0].Name != "alice" || us[0].Up != want {
		t.Fatalf("users after a reload that removed bob: %+v", us)
	}
}

// source accepts TCP connections that each send without end and discard
// what they receive, counting it.
type source struct {
	addr     string
	received atomic.Int64
}

func tcpSource(t *testing.T) *source {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &source{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				go func() {
					b := make([]byte, 32<<10)
					for {
						if _, err := c.Write(b); err != nil {
							c.Close()
							return
						}
					}
				}()
				b := make([]byte, 32<<10)
				for {
					n, err := c.Read(b)
					s.received.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
		}
	})
	return s
}

// pump writes to c without end and counts what it reads, until c closes.
func pump(c net.Conn, read *atomic.Int64) {
	go func() {
		b := make([]byte, 32<<10)
		for {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := c.Read(b)
			read.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
}

// 1 Mbps in bytes per second, and the most a window of it may carry: half as
// much again, and two pacing steps of slack for every flow.
const mbps = 125_000

func paceLimit(window time.Duration, flows int) int64 {
	return int64(1.5*mbps*window.Seconds()) + int64(flows)*128<<10
}

// Two concurrent flows of a user paced at 1 Mbps together move at most
// about 1 Mbps each way, one through SOCKS and one through HTTP, while an
// unpaced user's flow moves far more meanwhile.
func TestAPacedUsersFlowsShareTheRate(t *testing.T) {
	s := usersSpec(
		spec.User{Username: "slow", Password: "pw", UpMbps: 1, DownMbps: 1},
		spec.User{Username: "fast", Password: "pw"},
	)
	sv, proxy := run(t, s, Options{})
	slowSrc, fastSrc := tcpSource(t), tcpSource(t)
	a, err := socksclient.Dial(proxy, slowSrc.addr, "slow", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := connectHTTP(t, sv.Addr("http-in").String(), slowSrc.addr, "slow", "pw")
	defer b.Close()
	f, err := socksclient.Dial(proxy, fastSrc.addr, "fast", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var slowDown, fastDown atomic.Int64
	pump(a, &slowDown)
	pump(b, &slowDown)
	pump(f, &fastDown)
	const window = 2 * time.Second
	time.Sleep(window)
	down, up := slowDown.Load(), slowSrc.received.Load()
	limit := paceLimit(window, 2)
	if down > limit || up > limit || down < mbps/2 || up < mbps/2 {
		t.Errorf("two 1 Mbps flows moved %d bytes down and %d up in %v, want each between %d and %d", down, up, window, mbps/2, limit)
	}
	if fd := fastDown.Load(); fd < 10*limit {
		t.Errorf("an unpaced user's flow moved only %d bytes in %v", fd, window)
	}
	if u, _ := sv.Tracker().User("slow"); u.Down < down || u.Up < up || u.Sessions != 2 {
		t.Errorf("slow's totals %+v, below what arrived (%d down, %d up)", u, down, up)
	}
}

// udpSink counts the payload bytes it receives.
func udpSink(t *testing.T) (*net.UDPConn, *atomic.Int64) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		b := make([]byte, 65535)
		for {
			m, _, err := c.ReadFromUDP(b)
			if err != nil {
				return
			}
			n.Add(int64(m))
		}
	}()
	return c, &n
}

// A UDP sub-link of a paced user sends at most the user's rate, however
// fast the client sends.
func TestAPacedUsersSubLinkKeepsTheRate(t *testing.T) {
	sv, proxy := run(t, usersSpec(spec.User{Username: "slow", Password: "pw", UpMbps: 1}), Options{})
	sink, got := udpSink(t)
	a := associateAs(t, proxy, "slow", "pw")
	p := make([]byte, 1200)
	const window = 2 * time.Second
	for end := time.Now().Add(window); time.Now().Before(end); {
		a.send(sink.LocalAddr(), p)
		time.Sleep(time.Millisecond) // ~1,200 packets a second: 10 Mbps offered
	}
	if n, limit := got.Load(), paceLimit(window, 1); n > limit || n < mbps/2 {
		t.Fatalf("a 1 Mbps sub-link delivered %d bytes in %v, want between %d and %d", n, window, mbps/2, limit)
	}
	var flows int
	for _, f := range sv.Tracker().Flows() {
		if f.Network == netx.UDP && f.User == "slow" && f.Session != 0 {
			flows++
		}
	}
	if flows != 1 {
		t.Fatalf("%d UDP flows of slow's session, want 1", flows)
	}
}

// A reload that changes a user's rate applies to the user's live flow: the
// same flow goes unpaced, then paced again. Even under drain = close the
// inbound keeps its connections, since only a rate changed.
func TestAReloadChangingAUsersRateReachesItsLiveFlows(t *testing.T) {
	paced := func(rate int) *spec.Spec {
		s := usersSpec(spec.User{Username: "u", Password: "pw", DownMbps: rate})
		s.Reload.Drain = spec.DrainClose
		return s
	}
	sv, proxy := run(t, paced(1), Options{})
	src := tcpSource(t)
	c, err := socksclient.Dial(proxy, src.addr, "u", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var down atomic.Int64
	pump(c, &down)
	const window = 1500 * time.Millisecond
	measure := func() int64 {
		before := down.Load()
		time.Sleep(window)
		return down.Load() - before
	}
	limit := paceLimit(window, 1)
	if n := measure(); n > limit {
		t.Fatalf("paced at 1 Mbps: %d bytes in %v", n, window)
	}
	flows := sv.Tracker().Flows()
	if err := sv.Apply(paced(0)); err != nil {
		t.Fatal(err)
	}
	if n := measure(); n < 10*limit {
		t.Fatalf("unpaced by a reload: only %d bytes in %v", n, window)
	}
	if err := sv.Apply(paced(1)); err != nil {
		t.Fatal(err)
	}
	measure() // what the socket buffers held drains
	if n := measure(); n > limit {
		t.Fatalf("paced again by a reload: %d bytes in %v", n, window)
	}
	if now := sv.Tracker().Flows(); len(now) != 1 || len(flows) != 1 || now[0].ID != flows[0].ID {
		t.Fatalf("flows %+v across the reloads, want the same one flow as %+v", now, flows)
	}
	if u, _ := sv.Tracker().User("u"); u.DownMbps != 1 {
		t.Fatalf("u %+v", u)
	}
}

// An inbound without users makes no sessions: its flows are filed under
// none, and no user is listed.
func TestAnUnauthenticatedInboundMakesNoSessions(t *testing.T) {
	sv, proxy := run(t, baseSpec(), Options{})
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echoOnce(c, "anonymous"); err != nil {
		t.Fatal(err)
	}
	tr := sv.Tracker()
	flows := tr.Flows()
	if len(flows) != 1 || flows[0].Session != 0 {
		t.Fatalf("flows %+v, want one of no session", flows)
	}
	if n, u := len(tr.Sessions()), tr.Users(); n != 0 || len(u) != 0 {
		t.Fatalf("%d sessions and users %v without authentication", n, u)
	}
}
