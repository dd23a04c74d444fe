package fanout_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/track"
)

// dualOutbound's packet links are netx.DualUDP sockets, which tell their
// reader when no datagram is waiting (netx.IdleNotifier), as the direct
// outbound's are.
type dualOutbound struct{}

var _ outbound.Outbound = dualOutbound{}

func (dualOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("dualOutbound dials no streams")
}

func (dualOutbound) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	u, err := netx.NewDialer(netx.SocketPolicy{}, 0).BindDual(ctx, []netx.Family{netx.V4}, nil)
	if err != nil {
		return nil, err
	}
	return dualLink{u}, nil
}

type dualLink struct{ u *netx.DualUDP }

func (l dualLink) WritePacket(p []byte, to netx.Addr) error {
	ap, ok := to.AddrPort()
	if !ok {
		return errors.New("dualLink sends to IPs only")
	}
	return l.u.WriteTo(p, ap)
}

func (l dualLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.u.ReadFrom(p)
	return n, netx.AddrFromAddrPort(from), err
}

func (l dualLink) WaitPacket() (int, error)    { return l.u.WaitPacket() }
func (l dualLink) NotifyIdle(idle func()) bool { return l.u.NotifyIdle(idle) }
func (l dualLink) Close() error                { return l.u.Close() }

// recordingBatch records what its reader added and when it flushed; the
// first Add waits for gate, so that what the peer sends meanwhile queues
// on the socket.
type recordingBatch struct {
	gate    chan struct{}
	mu      sync.Mutex
	pending []string
	flushed chan []string
}

func (b *recordingBatch) Add(p []byte, _ netx.Addr) {
	<-b.gate
	b.mu.Lock()
	b.pending = append(b.pending, string(p))
	b.mu.Unlock()
}

func (b *recordingBatch) Flush() {
	b.mu.Lock()
	run := b.pending
	b.pending = nil
	b.mu.Unlock()
	if len(run) > 0 {
		b.flushed <- run
	}
}

func (b *recordingBatch) next(t *testing.T) []string {
	t.Helper()
	select {
	case run := <-b.flushed:
		return run
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was never flushed")
		return nil
	}
}

// burstPeer answers "go" with n datagrams "0", "1", ... at once.
func burstPeer(t *testing.T, n int) (netx.Addr, chan struct{}) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			_, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			for i := range n {
				c.WriteToUDPAddrPort([]byte{byte('0' + i)}, from)
			}
			sent <- struct{}{}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return netx.AddrFromAddrPort(c.LocalAddr().(*net.UDPAddr).AddrPort()), sent
}

// With PushBatches, a sub-link's reader adds every reply it takes off the
// socket to its batch and flushes the batch once the socket has no more
// waiting: replies that arrived together are handed on together. On a
// sub-link that cannot tell (no netx.IdleNotifier), each is flushed on
// its own.
func TestPushBatchesFlushTheRepliesThatArrivedTogether(t *testing.T) {
	for _, c := range []struct {
		name string
		out  outbound.Outbound
		want []string // the runs flushed
	}{
		{"idle-notifying", dualOutbound{}, []string{"01234"}},
		{"plain", &udpOutbound{}, []string{"0", "1", "2", "3", "4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			peer, sent := burstPeer(t, 5)
			cell := new(plane.Cell)
			cell.Store(planeOf(t, 1, target("direct", 1, c.out)))
			l := fanout.New(cell, assocFlow, track.New(), nil)
			defer l.Close()
			var (
				mu      sync.Mutex
				batches []*recordingBatch
			)
			l.PushBatches(func() netx.PacketBatch {
				b := &recordingBatch{gate: make(chan struct{}), flushed: make(chan []string, 8)}
				mu.Lock()
				batches = append(batches, b)
				mu.Unlock()
				return b
			})
			if err := l.WritePacket([]byte("go"), peer); err != nil {
				t.Fatal(err)
			}
			<-sent
			time.Sleep(50 * time.Millisecond) // the five queue on the socket
			mu.Lock()
			if len(batches) != 1 {
				mu.Unlock()
				t.Fatalf("%d batches opened, want one for the one sub-link", len(batches))
			}
			b := batches[0]
			mu.Unlock()
			close(b.gate)
			var got []string
			for n := 0; n < 5; {
				run := b.next(t)
				got = append(got, strings.Join(run, ""))
				n += len(run)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("flushed %q, want %q", got, c.want)
			}
		})
	}
}
