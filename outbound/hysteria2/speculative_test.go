package hysteria2

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

var udpFlow = netx.Flow{Network: netx.UDP}

// speculative opens a speculative UDP link on o.
func speculative(t *testing.T, o *Outbound) netx.PacketLink {
	t.Helper()
	l, err := o.DialPacket(netx.WithSpeculative(context.Background()), udpFlow)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func slotState(o *Outbound) slot.State {
	st, _ := o.SlotState()
	return st
}

// A speculative dial cancelled before its connection is up leaves nothing:
// no server session comes up later, and the slot is as it was. A plain
// dial's connect would go on (TestACancelledDialLeavesTheAttemptRunning).
func TestACancelledSpeculativeDialLeavesNoConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	gate := make(chan struct{})
	h.sockets.gate = gate
	o := h.outbound(testSpec(srv.addr, srv.cert))
	ctx, cancel := context.WithCancel(netx.WithSpeculative(context.Background()))
	done := make(chan error, 1)
	go func() {
		l, err := o.DialPacket(ctx, udpFlow)
		if l != nil {
			l.Close()
		}
		done <- err
	}()
	waitFor(t, "the connect attempt", func() bool { return h.sockets.count() == 1 })
	cancel()
	close(gate)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled speculative dial: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // time enough for a handshake on loopback
	if n := srv.sessions.Load(); n != 0 {
		t.Fatalf("%d server sessions after a cancelled speculative dial, want 0", n)
	}
	if st := slotState(o); st.Phase != slot.Idle || st.Failures != 0 || st.Detached != 0 || st.Gen != 0 {
		t.Fatalf("slot after a cancelled speculative dial: %+v", st)
	}
}

// Cancelled in the middle of its QUIC handshake (a server that never
// answers), a speculative dial returns at once and counts no failure.
func TestASpeculativeHandshakeEndsWithItsDial(t *testing.T) {
	cert := newTestCert(t)
	h := newHarness(t)
	h.timeout = time.Minute
	o := h.outbound(testSpec(blackhole(t), cert))
	ctx, cancel := context.WithCancel(netx.WithSpeculative(context.Background()))
	done := make(chan error, 1)
	go func() {
		_, err := o.DialPacket(ctx, udpFlow)
		done <- err
	}()
	waitFor(t, "the connect attempt", func() bool { return h.sockets.count() == 1 })
	time.Sleep(50 * time.Millisecond) // the client's Initial is out
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled mid-handshake: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the speculative handshake outlived its dial")
	}
	if st := slotState(o); st.Phase != slot.Idle || st.Failures != 0 || st.LastErr != nil {
		t.Fatalf("slot after the cancelled handshake: %+v", st)
	}
}

// A losing speculative link closes the connection it brought up; the slot
// never held it.
func TestALosingSpeculativeLinkClosesItsConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := speculative(t, o)
	peer := udpEcho(t, "r:")
	if got, _ := exchange(t, l, peer, []byte("x")); string(got) != "r:x" {
		t.Fatalf("reply %q", got)
	}
	if st := slotState(o); st.Phase != slot.Idle || st.Detached != 1 || st.Gen != 0 {
		t.Fatalf("slot with a speculative link open: %+v", st)
	}
	l.Close()
	waitFor(t, "the server to see the connection end", func() bool {
		cs := srv.Conns()
		return len(cs) == 1 && cs[0].Closed
	})
	if st := slotState(o); st.Phase != slot.Idle || st.Detached != 0 || st.Failures != 0 {
		t.Fatalf("slot after the loser closed: %+v", st)
	}
}

// The committed winner's connection becomes the slot's: the next flows
// ride it without a handshake, and it outlives the winner's link.
func TestACommittedSpeculativeConnectionIsShared(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	l := speculative(t, o)
	netx.Commit(context.Background(), l)
	if st := slotState(o); st.Phase != slot.Up || st.Gen != 1 || st.Detached != 0 || st.Holds != 1 {
		t.Fatalf("slot after the commit: %+v", st)
	}
	peer := udpEcho(t, "w:")
	if got, _ := exchange(t, l, peer, []byte("x")); string(got) != "w:x" {
		t.Fatalf("reply %q", got)
	}
	next := dialLink(t, o)
	if got, _ := exchange(t, next, peer, []byte("y")); string(got) != "w:y" {
		t.Fatalf("reply %q", got)
	}
	dialEcho(t, o, tcpEcho(t))
	l.Close()
	if got, _ := exchange(t, next, peer, []byte("z")); string(got) != "w:z" {
		t.Fatalf("reply %q after the winner's link closed", got)
	}
	if n, s := srv.sessions.Load(), h.sockets.count(); n != 1 || s != 1 {
		t.Fatalf("%d server sessions on %d sockets, want 1 on 1", n, s)
	}
	if cs := srv.Conns(); len(cs) != 1 || cs[0].Closed {
		t.Fatalf("server connections: %+v", cs)
	}
}

// A winner committed while the slot already has a connection keeps its own
// alone: it carries the flow, and closes with the link, leaving the shared
// one as it was.
func TestACommitOntoATakenSlotKeepsTheConnectionPrivate(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := speculative(t, o)
	shared := dialLink(t, o) // the slot's own connection
	netx.Commit(context.Background(), l)
	if st := slotState(o); st.Gen != 1 || st.Detached != 1 || st.Holds != 1 {
		t.Fatalf("slot after a commit onto a taken slot: %+v", st)
	}
	peer := udpEcho(t, "p:")
	if got, _ := exchange(t, l, peer, []byte("x")); string(got) != "p:x" {
		t.Fatalf("reply %q", got)
	}
	l.Close()
	waitFor(t, "the private connection to close", func() bool {
		cs := srv.Conns()
		return len(cs) == 2 && cs[0].Closed != cs[1].Closed
	})
	if got, _ := exchange(t, shared, peer, []byte("y")); string(got) != "p:y" {
		t.Fatalf("reply %q on the shared connection", got)
	}
	if st := slotState(o); st.Phase != slot.Up || st.Gen != 1 || st.Detached != 0 {
		t.Fatalf("slot: %+v", st)
	}
}

// With a connection up, a speculative dial uses it: nothing new comes up,
// and its commit changes nothing.
func TestASpeculativeDialUsesTheConnectionUp(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	dialEcho(t, o, tcpEcho(t))
	l := speculative(t, o)
	netx.Commit(context.Background(), l)
	l.Close()
	if n, s := srv.sessions.Load(), h.sockets.count(); n != 1 || s != 1 {
		t.Fatalf("%d server sessions on %d sockets, want 1 on 1", n, s)
	}
	if st := slotState(o); st.Phase != slot.Up || st.Gen != 1 || st.Holds != 0 {
		t.Fatalf("slot: %+v", st)
	}
}
