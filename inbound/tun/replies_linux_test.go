package tun

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"switchyard/netx"
)

// replyLab is an association whose inbound writes to one end of a
// SOCK_SEQPACKET pair, as it would to the device's file: each write is
// one message at the other end.
type replyLab struct {
	a    *association
	in   *Inbound
	peer *os.File
}

func newReplyLab(t *testing.T, app netip.AddrPort, peers ...netip.AddrPort) *replyLab {
	t.Helper()
	raw, peer := seqpacketPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in := &Inbound{cfg: Config{MTU: 1500}, raw: raw, rawOut: raw, log: slog.New(slog.DiscardHandler), ctx: ctx, cancel: cancel}
	in.segment.Store(true)
	a := &association{as: &associations{in: in}, src: app}
	for _, p := range peers {
		a.sent.note(p)
	}
	return &replyLab{a: a, in: in, peer: peer}
}

// written is one write to the device: its virtio-net header and packet.
type written struct {
	h   virtioHdr
	pkt []byte
}

// writes returns every write made so far.
func (l *replyLab) writes(t *testing.T) []written {
	t.Helper()
	var out []written
	buf := make([]byte, 70000)
	for {
		l.peer.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := l.peer.Read(buf)
		if err != nil {
			return out
		}
		out = append(out, written{parseVirtioHdr(buf), bytes.Clone(buf[virtioHdrLen:n])})
	}
}

// datagram is one datagram as the application reads it.
type appDatagram struct {
	from, to netip.AddrPort
	payload  string
}

// datagrams cuts a write into the datagrams the kernel delivers (the
// reader's own cutting of a segmented packet, which mirrors the kernel's).
func datagrams(t *testing.T, w written) []appDatagram {
	t.Helper()
	var out []appDatagram
	_, err := offloaded(w.h, bytes.Clone(w.pkt), nil, func(p []byte, validated bool) {
		src, dst, payload, ok := plainUDP(p, validated)
		if !ok {
			t.Fatalf("a datagram of the write does not parse (validated %v): % x", validated, p[:min(len(p), 48)])
		}
		out = append(out, appDatagram{src, dst, string(payload)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (l *replyLab) add(b netx.PacketBatch, from netip.AddrPort, p string) {
	b.Add([]byte(p), netx.AddrFromAddrPort(from))
}

var (
	replyApp   = netip.MustParseAddrPort("172.19.0.1:40000")
	replyPeerA = netip.MustParseAddrPort("10.1.0.1:443")
	replyPeerB = netip.MustParseAddrPort("10.1.0.2:443")
)

// A run of replies from one peer, each as long as the first but the last,
// goes to the device as one packet for the kernel to cut: the virtio-net
// header asks for UDP segmentation at the first one's length and leaves
// the checksums to the kernel, the UDP header holds the pseudo-header's
// sum over the whole length (which the kernel adjusts to each datagram's),
// and cut as the kernel cuts, the packet is the same datagrams in order.
func TestARunOfRepliesIsOneSegmentedWrite(t *testing.T) {
	l := newReplyLab(t, replyApp, replyPeerA)
	b := l.a.newBatch()
	var want []string
	for i := range 5 {
		p := strings.Repeat(string(rune('a'+i)), 1000)
		want = append(want, p)
		l.add(b, replyPeerA, p)
	}
	want = append(want, strings.Repeat("z", 300))
	l.add(b, replyPeerA, want[5])
	if w := l.writes(t); len(w) != 0 {
		t.Fatalf("%d writes before the flush", len(w))
	}
	b.Flush()
	ws := l.writes(t)
	if len(ws) != 1 {
		t.Fatalf("%d writes, want one", len(ws))
	}
	w := ws[0]
	if w.h.flags != virtioNeedsCsum || w.h.gsoType != virtioGSOUDPL4 || w.h.gsoSize != 1000 || w.h.csumStart != 20 {
		t.Fatalf("virtio-net header %+v", w.h)
	}
	ip := header.IPv4(w.pkt)
	if int(ip.TotalLength()) != len(w.pkt) || !ip.IsChecksumValid() || len(w.pkt) != 20+8+5300 {
		t.Fatalf("IP header: total %d of %d bytes, checksum valid %v", ip.TotalLength(), len(w.pkt), ip.IsChecksumValid())
	}
	u := header.UDP(w.pkt[20:])
	seed := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpip.AddrFrom4(replyPeerA.Addr().As4()), tcpip.AddrFrom4(replyApp.Addr().As4()), 8+5300)
	if u.Length() != 8+5300 || u.Checksum() != seed || u.SourcePort() != 443 || u.DestinationPort() != 40000 {
		t.Fatalf("UDP header: length %d, checksum %#x (want the pseudo-header's %#x), ports %d > %d", u.Length(), u.Checksum(), seed, u.SourcePort(), u.DestinationPort())
	}
	ds := datagrams(t, w)
	if len(ds) != len(want) {
		t.Fatalf("%d datagrams, want %d", len(ds), len(want))
	}
	for i, d := range ds {
		if d.from != replyPeerA || d.to != replyApp || d.payload != want[i] {
			t.Fatalf("datagram %d: %v > %v, %d bytes %.8q; want %d bytes %.8q", i, d.from, d.to, len(d.payload), d.payload, len(want[i]), want[i])
		}
	}
}

// A run ends at another peer, a longer datagram, a datagram after a
// shorter one, and segMax datagrams; a run of one is a plain packet with
// its checksum.
func TestRepliesRunsEnd(t *testing.T) {
	l := newReplyLab(t, replyApp, replyPeerA, replyPeerB)
	b := l.a.newBatch()
	in := []struct {
		from netip.AddrPort
		n    int
	}{
		{replyPeerA, 1000}, {replyPeerA, 1000}, // run 1
		{replyPeerB, 1000},                    // another peer: run 2, alone
		{replyPeerA, 1200}, {replyPeerA, 500}, // run 3: longer than run 1's, then a shorter last
		{replyPeerA, 500}, // after a shorter one: run 4, alone
	}
	for i, d := range in {
		l.add(b, d.from, strings.Repeat(string(rune('a'+i)), d.n))
	}
	b.Flush()
	for range segMax + 6 {
		l.add(b, replyPeerB, strings.Repeat("s", 100))
	}
	b.Flush()
	var got []string
	for _, w := range l.writes(t) {
		ds := datagrams(t, w)
		s := fmt.Sprintf("%d×%s", len(ds), ds[0].from.Addr())
		if w.h.gsoType == 0 {
			s += " plain"
		} else {
			s += fmt.Sprintf(" seg %d", w.h.gsoSize)
		}
		got = append(got, s)
	}
	want := []string{"2×10.1.0.1 seg 1000", "1×10.1.0.2 plain", "2×10.1.0.1 seg 1200", "1×10.1.0.1 plain", "64×10.1.0.2 seg 100", "6×10.1.0.2 seg 100"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("writes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// An IPv6 run: the IP header is 40 bytes and carries the payload length.
func TestARunOfIPv6Replies(t *testing.T) {
	app := netip.MustParseAddrPort("[fdfe:dcba:9876::1]:40000")
	peer := netip.MustParseAddrPort("[2001:db8::1]:443")
	l := newReplyLab(t, app, peer)
	b := l.a.newBatch()
	for range 3 {
		l.add(b, peer, strings.Repeat("6", 1200))
	}
	b.Flush()
	ws := l.writes(t)
	if len(ws) != 1 || ws[0].h.csumStart != 40 || ws[0].h.gsoSize != 1200 {
		t.Fatalf("writes %+v", ws)
	}
	if pl := binary.BigEndian.Uint16(ws[0].pkt[4:]); pl != 8+3600 {
		t.Fatalf("payload length %d", pl)
	}
	if ds := datagrams(t, ws[0]); len(ds) != 3 || ds[2].from != peer || ds[2].to != app {
		t.Fatalf("datagrams %+v", ds)
	}
}

// Without the offload every reply is written as it is added, each a plain
// packet.
func TestRepliesWithoutSegmentationGoOneByOne(t *testing.T) {
	l := newReplyLab(t, replyApp, replyPeerA)
	l.in.segment.Store(false)
	b := l.a.newBatch()
	for range 3 {
		l.add(b, replyPeerA, strings.Repeat("x", 1000))
	}
	ws := l.writes(t)
	if len(ws) != 3 {
		t.Fatalf("%d writes before any flush, want 3", len(ws))
	}
	for _, w := range ws {
		if w.h.gsoType != 0 || len(datagrams(t, w)) != 1 {
			t.Fatalf("a segmented write: %+v", w.h)
		}
	}
}

// refusesSegments is a device file whose kernel takes no UDP segmentation
// offload on writes: a segmented write fails with EINVAL, any other goes
// through. It counts the segmented writes it refused.
type refusesSegments struct {
	w       io.Writer
	refused int
}

func (r *refusesSegments) Write(p []byte) (int, error) {
	if len(p) >= virtioHdrLen && parseVirtioHdr(p).gsoType == virtioGSOUDPL4 {
		r.refused++
		return 0, unix.EINVAL
	}
	return r.w.Write(p)
}

// A run the kernel refuses to cut (EINVAL on the segmented write) still
// reaches the application: its datagrams go one by one, in order and
// whole, and the inbound stops offering segmented writes from then on.
func TestARunTheKernelRefusesGoesOneByOne(t *testing.T) {
	l := newReplyLab(t, replyApp, replyPeerA)
	dev := &refusesSegments{w: l.in.rawOut}
	l.in.rawOut = dev
	for round := range 2 {
		b := l.a.newBatch()
		var want []appDatagram
		for i := range 4 {
			p := strings.Repeat(string(rune('a'+i)), 900)
			if i == 3 {
				p = p[:100]
			}
			want = append(want, appDatagram{replyPeerA, replyApp, p})
			l.add(b, replyPeerA, p)
		}
		b.Flush()
		ws := l.writes(t)
		var got []appDatagram
		for _, w := range ws {
			if w.h.gsoType != 0 {
				t.Fatalf("round %d: a segmented write reached the device: %+v", round, w.h)
			}
			got = append(got, datagrams(t, w)...)
		}
		if len(ws) != 4 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %d writes, the application reads %d datagrams; want the 4 replies in order, one write each", round, len(ws), len(got))
		}
		if l.in.segment.Load() {
			t.Fatalf("round %d: segmentation still on after the kernel refused it", round)
		}
	}
	if dev.refused != 1 {
		t.Fatalf("%d segmented writes tried, want only the first run's", dev.refused)
	}
}

// The reply of a peer the application never sent to, by name, is
// dropped: a run takes only what the association would write.
func TestRepliesOfNoSourceAreDropped(t *testing.T) {
	l := newReplyLab(t, replyApp, replyPeerA)
	b := l.a.newBatch()
	b.Add([]byte("who"), netx.Addr{Name: "example.com", Port: 9})
	b.Flush()
	if ws := l.writes(t); len(ws) != 0 {
		t.Fatalf("%d writes", len(ws))
	}
}
