package netx

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func sizes(ns ...int) [][]byte {
	ps := make([][]byte, len(ns))
	for i, n := range ns {
		ps[i] = make([]byte, n)
	}
	return ps
}

func TestSegmentRun(t *testing.T) {
	many := make([]int, 70)
	for i := range many {
		many[i] = 100
	}
	big := make([]int, 60)
	for i := range big {
		big[i] = 1400
	}
	for _, c := range []struct {
		sizes []int
		want  int
	}{
		{[]int{100}, 1},
		{[]int{100, 100, 100}, 3},
		{[]int{100, 100, 40, 100}, 3},  // the shorter one ends the run
		{[]int{100, 200, 100}, 1},      // a longer one cannot follow
		{[]int{0, 0}, 1},               // an empty datagram cannot be a segment
		{[]int{100, 0, 100}, 1},        //
		{[]int{1401, 1401}, 1},         // above segmentMaxSize
		{[]int{1400, 1400, 1400}, 3},   //
		{many, segmentMaxCount},        // at most segmentMaxCount
		{big, segmentMaxBytes / 1400},  // at most segmentMaxBytes
		{[]int{100, 100, 100, 100}, 4}, //
	} {
		if got := segmentRun(sizes(c.sizes...)); got != c.want {
			t.Errorf("segmentRun(%v) = %d, want %d", c.sizes, got, c.want)
		}
	}
}

// batchReceiver is a loopback socket that reads n datagrams.
func batchReceiver(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func receiveAll(t *testing.T, c *net.UDPConn, want [][]byte) {
	t.Helper()
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i, len(want), err)
		}
		if !bytes.Equal(buf[:n], w) {
			t.Fatalf("datagram %d: %d bytes %q..., want %d bytes %q...", i, n, buf[:min(n, 8)], len(w), w[:min(len(w), 8)])
		}
	}
}

// numbered returns datagrams of the sizes, each filled with its index.
func numbered(ns ...int) [][]byte {
	ps := sizes(ns...)
	for i, p := range ps {
		copy(p, bytes.Repeat([]byte(fmt.Sprintf("%03d", i)), len(p)/3+1))
	}
	return ps
}

func bindV4(t *testing.T) *DualUDP {
	t.Helper()
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// countSegmented counts segmented sends, passing them to send.
func countSegmented(t *testing.T, send func(*net.UDPConn, [][]byte, netip.AddrPort) error) *atomic.Int32 {
	var n atomic.Int32
	old := sendSegmented
	sendSegmented = func(c *net.UDPConn, ps [][]byte, to netip.AddrPort) error {
		n.Add(1)
		return send(c, ps, to)
	}
	t.Cleanup(func() { sendSegmented = old })
	return &n
}

// Runs of equal datagrams go out in one send each, and the receiver reads
// every datagram whole and in order.
func TestWriteBatchToSegmentsRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("UDP_SEGMENT is Linux's")
	}
	calls := countSegmented(t, sendSegmentedOS)
	u := bindV4(t)
	rc, to := batchReceiver(t)
	ps := numbered(100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 40, 200, 200, 200, 3000, 7)
	n, err := u.WriteBatchTo(ps, to)
	if err != nil || n != len(ps) {
		t.Fatalf("WriteBatchTo = %d, %v; want %d, nil", n, err, len(ps))
	}
	receiveAll(t, rc, ps)
	// 10×100 and 40; 3×200; 3000 and 7 alone.
	if got := calls.Load(); got != 2 {
		t.Errorf("%d segmented sends, want 2", got)
	}
	if u.unsegmented.Load() {
		t.Error("the kernel refused a segmented send on loopback")
	}
}

// A kernel that refuses segmented sends gets each datagram on its own,
// from the run it refused on, and is not asked again.
func TestWriteBatchToFallsBackOneByOne(t *testing.T) {
	calls := countSegmented(t, func(*net.UDPConn, [][]byte, netip.AddrPort) error { return errSegmentsRefused })
	u := bindV4(t)
	rc, to := batchReceiver(t)
	ps := numbered(64, 64, 64, 64)
	for range 2 {
		if n, err := u.WriteBatchTo(ps, to); err != nil || n != len(ps) {
			t.Fatalf("WriteBatchTo = %d, %v; want %d, nil", n, err, len(ps))
		}
		receiveAll(t, rc, ps)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("%d segmented sends tried, want 1 (then none)", got)
	}
}

// WritePackets loops over WritePacket for a link that cannot batch, up to
// the first failure.
func TestWritePacketsLoops(t *testing.T) {
	l := &countingLink{failAt: 3}
	n, err := WritePackets(l, sizes(1, 2, 3, 4, 5), Addr{})
	if n != 3 || err == nil || l.n != 3 {
		t.Fatalf("WritePackets = %d, %v after %d writes; want 3, an error, 3", n, err, l.n)
	}
}

type countingLink struct{ n, failAt int }

func (l *countingLink) WritePacket([]byte, Addr) error {
	if l.n == l.failAt {
		return net.ErrClosed
	}
	l.n++
	return nil
}
func (l *countingLink) ReadPacket([]byte) (int, Addr, error) { return 0, Addr{}, net.ErrClosed }
func (l *countingLink) Close() error                         { return nil }
