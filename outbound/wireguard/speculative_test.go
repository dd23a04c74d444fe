package wireguard

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

var udpFlow = netx.Flow{Network: netx.UDP}

func speculativeLink(t *testing.T, c *client) *packetLink {
	t.Helper()
	l, err := c.DialPacket(netx.WithSpeculative(context.Background()), udpFlow)
	if err != nil {
		t.Fatal(err)
	}
	return l.(*packetLink)
}

// A losing speculative link stops the tunnel it started; the slot never
// held it.
func TestALosingSpeculativeLinkStopsItsTunnel(t *testing.T) {
	_, c := pair(t, "", nil)
	l := speculativeLink(t, c)
	r := readLink(t, l)
	if _, got := r.exchange(t, l, mustAddr("10.7.0.1:9001"), []byte("a")); string(got) != "p0:a" {
		t.Fatalf("reply %q", got)
	}
	if st, _ := c.SlotState(); st.Phase != slot.Idle || st.Detached != 1 || tunnelOf(c) != nil {
		t.Fatalf("slot with a speculative link open: %+v", st)
	}
	l.Close()
	if l.tun.alive() {
		t.Fatal("the loser's tunnel runs on after its link closed")
	}
	if st, _ := c.SlotState(); st.Phase != slot.Idle || st.Detached != 0 || st.Failures != 0 {
		t.Fatalf("slot after the loser closed: %+v", st)
	}
}

// The committed winner's tunnel becomes the slot's: the next flow rides
// it, with no new start.
func TestACommittedSpeculativeTunnelIsShared(t *testing.T) {
	_, c := pair(t, "", nil)
	l := speculativeLink(t, c)
	netx.Commit(context.Background(), l)
	if tunnelOf(c) != l.tun {
		t.Fatal("the committed tunnel is not the slot's")
	}
	next, err := c.DialPacket(context.Background(), udpFlow)
	if err != nil {
		t.Fatal(err)
	}
	if next.(*packetLink).tun != l.tun {
		t.Fatal("the next flow started a tunnel of its own")
	}
	l.Close()
	r := readLink(t, next)
	if _, got := r.exchange(t, next, mustAddr("10.7.0.1:9001"), []byte("b")); string(got) != "p0:b" {
		t.Fatalf("reply %q after the winner's link closed", got)
	}
	if n := c.servers.count(); n != 1 {
		t.Fatalf("%d tunnel starts (endpoint lookups), want 1", n)
	}
	if st, _ := c.SlotState(); st.Phase != slot.Up || st.Gen != 1 || st.Detached != 0 {
		t.Fatalf("slot: %+v", st)
	}
}

// blockingResolver holds each lookup until its context ends.
type blockingResolver struct{ entered chan context.Context }

func (r blockingResolver) LookupIP(ctx context.Context, _ string) ([]netip.Addr, error) {
	r.entered <- ctx
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// A speculative dial cancelled while its tunnel starts ends the start with
// it, and counts no failure.
func TestACancelledSpeculativeStartEndsWithItsDial(t *testing.T) {
	keys := newKeyPair(t)
	c := newClient(t, clientSpec(nil, keys))
	res := blockingResolver{entered: make(chan context.Context, 1)}
	c.Outbound.servers = res
	ctx, cancel := context.WithCancel(netx.WithSpeculative(context.Background()))
	done := make(chan error, 1)
	go func() {
		_, err := c.DialPacket(ctx, udpFlow)
		done <- err
	}()
	var start context.Context
	select {
	case start = <-res.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel start did not begin")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled speculative dial: %v", err)
	}
	if start.Err() == nil {
		t.Fatal("the speculative start outlived its dial")
	}
	if st, _ := c.SlotState(); st.Phase != slot.Idle || st.Failures != 0 || st.Detached != 0 {
		t.Fatalf("slot: %+v", st)
	}
}

// A winner committed while the slot has a tunnel of its own moves onto
// that tunnel before its first send, and its own tunnel stops: two devices
// of one key would take the peer from each other.
func TestACommitOntoATakenSlotMovesTheLinkToTheSharedTunnel(t *testing.T) {
	_, c := pair(t, "", nil)
	l := speculativeLink(t, c)
	own := l.tun
	shared, err := c.DialPacket(context.Background(), udpFlow)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	netx.Commit(context.Background(), l)
	if l.tun != tunnelOf(c) || l.tun == own {
		t.Fatal("the committed link did not move onto the slot's tunnel")
	}
	if own.alive() {
		t.Fatal("the link's own tunnel runs on beside the slot's")
	}
	r := readLink(t, l)
	if _, got := r.exchange(t, l, mustAddr("10.7.0.1:9001"), []byte("m")); string(got) != "p0:m" {
		t.Fatalf("reply %q after the move", got)
	}
	if st, _ := c.SlotState(); st.Phase != slot.Up || st.Gen != 1 || st.Detached != 0 || st.Holds != 2 {
		t.Fatalf("slot: %+v", st)
	}
	l.Close()
	if st, _ := c.SlotState(); st.Holds != 1 {
		t.Fatalf("holds after the moved link closed: %d", st.Holds)
	}
}

// A link closed before its commit is not moved: the commit changes
// nothing.
func TestACommitAfterCloseDoesNothing(t *testing.T) {
	_, c := pair(t, "", nil)
	l := speculativeLink(t, c)
	l.Close()
	netx.Commit(context.Background(), l)
	if st, _ := c.SlotState(); st.Phase != slot.Idle || st.Detached != 0 {
		t.Fatalf("slot: %+v", st)
	}
}
