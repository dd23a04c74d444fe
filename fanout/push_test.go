package fanout_test

import (
	"strings"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// With PushPackets, each sub-link's reader hands its replies to the
// function itself, whole and attributed to their sources; nobody calls
// ReadPacket.
func TestPushPacketsDeliversRepliesFromEverySubLink(t *testing.T) {
	peerA, peerB := newEcho(t), newEcho(t)
	cell := new(plane.Cell)
	cell.Store(planeOf(t, 1, target("direct", 1, &udpOutbound{})))
	l := fanout.New(cell, assocFlow, track.New(), nil)
	defer l.Close()
	got := make(chan datagram, 8)
	l.PushPackets(func(p []byte, from netx.Addr) {
		got <- datagram{payload: string(p), from: from}
	})
	big := strings.Repeat("b", 40000) // beyond the smaller buffer classes
	for _, m := range []struct {
		payload string
		to      netx.Addr
	}{{"for A", peerA.addr}, {big, peerB.addr}} {
		if err := l.WritePacket([]byte(m.payload), m.to); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-got:
			if d.payload != m.payload || d.from != m.to {
				t.Fatalf("pushed %.20q (%d bytes) from %v; want %.20q from %v", d.payload, len(d.payload), d.from, m.payload, m.to)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no reply pushed")
		}
	}
}
