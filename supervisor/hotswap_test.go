package supervisor

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/spec"
	"switchyard/test/socksclient"
)

// echoOnce writes p and reads it back on c.
func echoOnce(c net.Conn, p string) error {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(p)); err != nil {
		return err
	}
	b := make([]byte, len(p))
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if string(b) != p {
		return errors.New("echo differs")
	}
	return nil
}

func TestARouteChangeReachesTheNextUDPPacketButNotAnEstablishedTCPFlow(t *testing.T) {
	sv, proxy := run(t, baseSpec(), Options{})
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	peer := udpEcho(t).LocalAddr().String()
	a.Send(peer, []byte("before"))
	if _, _, ok := a.Recv(2 * time.Second); !ok {
		t.Fatal("no reply before the change")
	}
	s := baseSpec()
	s.Route.Final = "block"
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	a.Send(peer, []byte("after"))
	if _, p, ok := a.Recv(500 * time.Millisecond); ok {
		t.Fatalf("a packet after the route became block was answered: %q", p)
	}
	if err := echoOnce(c, "still here"); err != nil {
		t.Fatalf("the established TCP flow did not survive the route change: %v", err)
	}
	if _, err := socksclient.Dial(proxy, tcpEcho(t), "", ""); err == nil {
		t.Fatal("a new TCP flow ignored the new route")
	}
}

func TestAChangedOutboundKeepsItsOldFlowsUnlessDrainedWithClose(t *testing.T) {
	sv, proxy := run(t, baseSpec(), Options{})
	echo := tcpEcho(t)
	dial := func() net.Conn {
		c, err := socksclient.Dial(proxy, echo, "", "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial()
	if err := echoOnce(c1, "v1"); err != nil {
		t.Fatal(err)
	}
	// Version 2 of direct, v1 drained with keep: c1 runs on.
	s2 := baseSpec()
	s2.Outbounds[0].AddressFamily = "ipv4_only"
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	c2 := dial()
	if err := echoOnce(c2, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := echoOnce(c1, "v1 kept"); err != nil {
		t.Fatalf("a flow on a version drained with keep ended: %v", err)
	}
	// Version 3, v2 drained with close: c2 ends, c1 (v1) still runs.
	s3 := baseSpec()
	s3.Outbounds[0].AddressFamily = "prefer_ipv4"
	s3.Reload.Drain = spec.DrainClose
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil || errors.Is(err, errTimeout()) {
		t.Fatalf("a flow on a version drained with close is still open: %v", err)
	}
	if err := echoOnce(c1, "v1 still"); err != nil {
		t.Fatalf("closing v2 ended a v1 flow: %v", err)
	}
	c3 := dial()
	if err := echoOnce(c3, "v3"); err != nil {
		t.Fatal(err)
	}
	// The client sees c2 end when its conn closes; the relay then ends and
	// the tracker lets the flow go, a moment later.
	var versions map[string]int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		versions = map[string]int{}
		for _, f := range sv.Tracker().Flows() {
			versions[f.Outbound]++
		}
		if versions["direct@v1"] == 1 && versions["direct@v2"] == 0 && versions["direct@v3"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flows by version %v", versions)
		}
	}
}

func errTimeout() error { return errDeadline }

var errDeadline = func() error {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	c1.SetReadDeadline(time.Now())
	_, err := c1.Read(make([]byte, 1))
	return err
}()

func TestInboundsAcrossApplies(t *testing.T) {
	s := baseSpec()
	s.Inbounds = append(s.Inbounds, spec.Inbound{Tag: "other", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:0")})
	sv, proxy := run(t, s, Options{})
	other := sv.Addr("other").String()
	echo := tcpEcho(t)
	live, err := socksclient.Dial(proxy, echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveOther, err := socksclient.Dial(other, echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer liveOther.Close()

	// socks-in unchanged; "other" changed in place (users added): new
	// connections need credentials, the live one runs on under keep.
	s2 := baseSpec()
	otherIn := spec.Inbound{Tag: "other", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:0"), Users: []spec.User{{Username: "u", Password: "p"}}}
	s2.Inbounds = append(s2.Inbounds, otherIn)
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if sv.Addr("socks-in").String() != proxy || sv.Addr("other").String() != other {
		t.Fatal("an inbound moved")
	}
	if err := echoOnce(live, "unchanged inbound"); err != nil {
		t.Fatal(err)
	}
	if err := echoOnce(liveOther, "changed inbound, kept flow"); err != nil {
		t.Fatal(err)
	}
	if _, err := socksclient.Dial(other, echo, "", ""); err == nil {
		t.Fatal("the changed inbound still accepts without credentials")
	}
	c, err := socksclient.Dial(other, echo, "u", "p")
	if err != nil {
		t.Fatalf("the changed inbound refuses its new credentials: %v", err)
	}
	c.Close()

	// "other" removed: it stops accepting.
	s3 := baseSpec()
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", other, time.Second); err == nil {
		c.Close()
		t.Fatal("a removed inbound still accepts")
	}
	// socks-in moved to a new port: rebound; the old port stops accepting.
	s4 := baseSpec()
	s4.Inbounds[0].Listen = netip.MustParseAddrPort("127.0.0.2:0")
	if err := sv.Apply(s4); err != nil {
		t.Fatal(err)
	}
	moved := sv.Addr("socks-in").String()
	if moved == proxy {
		t.Fatal("the inbound was not rebound")
	}
	if c, err := socksclient.Dial(moved, echo, "", ""); err != nil {
		t.Fatalf("the rebound inbound: %v", err)
	} else {
		c.Close()
	}
	if err := echoOnce(live, "old listener's flow under keep"); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", proxy, time.Second); err == nil {
		c.Close()
		t.Fatal("the old address of a moved inbound still accepts")
	}
}

func TestARefusedApplyChangesNothing(t *testing.T) {
	sv, proxy := run(t, baseSpec(), Options{})
	before := sv.Plane()
	s := baseSpec()
	s.Outbounds[0].AddressFamily = "sideways"
	s.Route.Final = "block"
	if err := sv.Apply(s); err == nil {
		t.Fatal("a spec whose outbound cannot be built was applied")
	}
	if sv.Plane() != before {
		t.Fatal("a refused apply published a plane")
	}
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatalf("the old configuration stopped serving: %v", err)
	}
	c.Close()
	// An inbound address that cannot be bound refuses the apply as well.
	taken, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s2 := baseSpec()
	s2.Inbounds[0].Listen = netip.MustParseAddrPort(taken.Addr().String())
	s2.Route.Final = "block"
	if err := sv.Apply(s2); err == nil {
		t.Fatal("an unbindable inbound was applied")
	}
	if sv.Plane() != before || sv.Addr("socks-in").String() != proxy {
		t.Fatal("a refused apply changed the running state")
	}
}
