package tun

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun/tuntest"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"switchyard/netx"
)

type emitted struct {
	p         []byte
	validated bool
}

func collect(out *[]emitted) func([]byte, bool) {
	return func(p []byte, v bool) { *out = append(*out, emitted{bytes.Clone(p), v}) }
}

// ipv4UDP is an IPv4 UDP packet of payload with lengths that are wrong, as
// the kernel leaves them in a segment it offloaded.
func ipv4UDP(payload []byte) []byte {
	p := make([]byte, header.IPv4MinimumSize+header.UDPMinimumSize+len(payload))
	header.IPv4(p).Encode(&header.IPv4Fields{TotalLength: 1, ID: 7, TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2})})
	header.UDP(p[20:]).Encode(&header.UDPFields{SrcPort: 1000, DstPort: 2000, Length: 1})
	copy(p[28:], payload)
	return p
}

func TestOffloadedUDPIsCutIntoItsDatagrams(t *testing.T) {
	payload := make([]byte, 2500)
	for i := range payload {
		payload[i] = byte(i)
	}
	var out []emitted
	h := virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 1000, csumStart: 20}
	if _, err := offloaded(h, ipv4UDP(payload), nil, collect(&out)); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d datagrams, want 3", len(out))
	}
	for i, e := range out {
		ip := header.IPv4(e.p)
		want := payload[i*1000 : min(i*1000+1000, len(payload))]
		u := header.UDP(e.p[20:])
		switch {
		case !e.validated:
			t.Errorf("datagram %d: not trusted", i)
		case int(ip.TotalLength()) != len(e.p) || !ip.IsChecksumValid():
			t.Errorf("datagram %d: total length %d of %d, header checksum valid %v", i, ip.TotalLength(), len(e.p), ip.IsChecksumValid())
		case ip.ID() != uint16(7+i):
			t.Errorf("datagram %d: id %d", i, ip.ID())
		case int(u.Length()) != 8+len(want) || u.SourcePort() != 1000 || u.DestinationPort() != 2000:
			t.Errorf("datagram %d: udp header %v", i, u)
		case !bytes.Equal(e.p[28:], want):
			t.Errorf("datagram %d: payload differs", i)
		}
	}
}

func TestOffloadedIPv6UDP(t *testing.T) {
	p := make([]byte, 40+8+1500)
	header.IPv6(p).Encode(&header.IPv6Fields{PayloadLength: 1, TransportProtocol: header.UDPProtocolNumber, HopLimit: 64,
		SrcAddr: tcpip.AddrFrom16([16]byte{0xfd, 15: 1}), DstAddr: tcpip.AddrFrom16([16]byte{0xfd, 15: 2})})
	var out []emitted
	h := virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 1200, csumStart: 40}
	if _, err := offloaded(h, p, nil, collect(&out)); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || header.IPv6(out[0].p).PayloadLength() != 1208 || header.IPv6(out[1].p).PayloadLength() != 308 {
		t.Fatalf("%d datagrams", len(out))
	}
}

func TestOffloadedTCPGoesWhole(t *testing.T) {
	p := make([]byte, 40+30000)
	header.IPv4(p).Encode(&header.IPv4Fields{TotalLength: 0, TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2})})
	header.TCP(p[20:]).Encode(&header.TCPFields{SrcPort: 1, DstPort: 2, DataOffset: 20, Flags: header.TCPFlagAck})
	var out []emitted
	if _, err := offloaded(virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4, gsoSize: 1448, csumStart: 20}, p, nil, collect(&out)); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || len(out[0].p) != len(p) || !out[0].validated {
		t.Fatalf("%d packets", len(out))
	}
	if ip := header.IPv4(out[0].p); int(ip.TotalLength()) != len(p) || !ip.IsChecksumValid() {
		t.Fatalf("total length %d, header checksum valid %v", ip.TotalLength(), ip.IsChecksumValid())
	}
}

func TestOffloadChecksumTrust(t *testing.T) {
	p := ipv4UDP([]byte("x"))
	for _, flags := range []byte{0, unix.VIRTIO_NET_HDR_F_NEEDS_CSUM} {
		var out []emitted
		if _, err := offloaded(virtioHdr{flags: flags}, p, nil, collect(&out)); err != nil || len(out) != 1 {
			t.Fatalf("flags %d: %v, %d packets", flags, err, len(out))
		}
		if out[0].validated != (flags != 0) {
			t.Fatalf("flags %d: trusted %v", flags, out[0].validated)
		}
	}
}

func TestOffloadedGarbageIsRefused(t *testing.T) {
	for _, c := range []struct {
		h virtioHdr
		p []byte
	}{
		{virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4}, []byte{0x45, 0}},
		{virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4}, make([]byte, 70000)},
		{virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 0, csumStart: 20}, ipv4UDP(make([]byte, 100))},
		{virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 10, csumStart: 60}, ipv4UDP(make([]byte, 10))},
		{virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 10, csumStart: 24}, ipv4UDP(make([]byte, 100))},
		{virtioHdr{gsoType: 9}, ipv4UDP(nil)},
	} {
		var out []emitted
		if _, err := offloaded(c.h, c.p, nil, collect(&out)); err == nil || len(out) != 0 {
			t.Errorf("%+v, %d bytes: %v, %d packets", c.h, len(c.p), err, len(out))
		}
	}
}

// A plain datagram reaches its association without the stack; a fragmented
// one still goes through the stack, which reassembles it. Only IPv4
// packets are counted: the application's stack sends IPv6 neighbour and
// listener messages of its own as it comes up. The peer does not answer:
// the application has no socket for a reply, and its ICMP port
// unreachable would reach the inbound's stack too.
func TestPlainUDPBypassesTheStack(t *testing.T) {
	conn := &fakeConnector{reply: func([]byte, netx.Addr) []netx.Addr { return nil }}
	l := newLab(t, Config{}, conn)
	src, dst := netip.AddrPortFrom(appV4, 40000), netip.MustParseAddrPort("198.51.100.1:7")
	stackIP := ipv4Received(t, l.in.stack.Stack())
	takeAll(l.in, udpPacket(src, dst, []byte("plain")))
	if n := stackIP.Value(); n != 0 {
		t.Fatalf("the stack received %d packets, want none", n)
	}
	waitSent(t, conn, 1)

	// The same datagram in two fragments.
	whole := udpPacket(src, dst, bytes.Repeat([]byte("f"), 24))
	takeAll(l.in, fragments(whole, 16)...)
	waitSent(t, conn, 2)
	if n := stackIP.Value(); n != 2 {
		t.Fatalf("the stack received %d packets, want the two fragments", n)
	}
}

// ipv4Received is the counter of IPv4 packets st's NIC received.
func ipv4Received(t *testing.T, st *stack.Stack) *tcpip.StatCounter {
	t.Helper()
	for _, nic := range st.NICInfo() {
		if s, ok := nic.NetworkStats[ipv4.ProtocolNumber].(stack.IPNetworkEndpointStats); ok {
			return s.IPStats().PacketsReceived
		}
	}
	t.Fatal("the stack has no IPv4 endpoint")
	return nil
}

// takeAll hands ps to the inbound as packets read in one go, with no
// offload.
func takeAll(in *Inbound, ps ...[]byte) {
	b := newRawBatch(in)
	for _, p := range ps {
		b.take(virtioHdr{}, p)
	}
	b.flush()
}

// The plain datagrams read in one go reach their associations as one run
// per source and destination, each in the order read; a datagram that
// takes the stack's way (fragments) does not pass those held before it.
func TestHeldDatagramsGoAsARunPerSourceAndDestination(t *testing.T) {
	conn := &fakeConnector{}
	l := newLab(t, Config{}, conn)
	app1, app2 := netip.AddrPortFrom(appV4, 40001), netip.AddrPortFrom(appV4, 40002)
	dstA, dstB := netip.MustParseAddrPort("198.51.100.1:7"), netip.MustParseAddrPort("198.51.100.2:7")
	d := func(src, dst netip.AddrPort, p string) []byte { return udpPacket(src, dst, []byte(p)) }
	takeAll(l.in,
		d(app1, dstA, "a1"), d(app2, dstA, "x1"), d(app1, dstB, "b1"), d(app1, dstA, "a2"),
		d(app2, dstA, "x2"), d(app1, dstA, "a3"))
	b := newRawBatch(l.in)
	b.take(virtioHdr{}, d(app1, dstA, "a4"))
	for _, f := range fragments(d(app1, dstA, strings.Repeat("f", 24)), 16) {
		b.take(virtioHdr{}, f)
	}
	b.take(virtioHdr{}, d(app1, dstA, "a5"))
	b.flush()

	links := conn.Links()
	if len(links) != 2 {
		t.Fatalf("%d associations, want 2", len(links))
	}
	want := map[netip.AddrPort][][]string{
		app1: {{"a1", "a2", "a3"}, {"b1"}, {"a4"}, {"a5"}},
		app2: {{"x1", "x2"}},
	}
	for _, link := range links {
		if got := link.Runs(); !slices.EqualFunc(got, want[link.flow.Src], slices.Equal) {
			t.Errorf("%v sent the runs %q, want %q", link.flow.Src, got, want[link.flow.Src])
		}
		if link.flow.Src == app1 {
			if got, want := link.Payloads(), []string{"a1", "a2", "a3", "b1", "a4", strings.Repeat("f", 24), "a5"}; !slices.Equal(got, want) {
				t.Errorf("%v sent %q, want %q", app1, got, want)
			}
		}
	}
}

// The datagrams of a UDP segment the kernel offloaded go to their
// association as one run, each intact.
func TestAnOffloadedSegmentGoesAsOneRun(t *testing.T) {
	conn := &fakeConnector{}
	l := newLab(t, Config{}, conn)
	payload := make([]byte, 2500)
	for i := range payload {
		payload[i] = byte(i)
	}
	b := newRawBatch(l.in)
	b.take(virtioHdr{}, udpPacket(netip.AddrPortFrom(appV4, 40001), netip.MustParseAddrPort("198.51.100.1:7"), []byte("before")))
	b.take(virtioHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 1000, csumStart: 20}, ipv4UDP(payload))
	b.flush()
	var runs [][]string
	for _, link := range conn.Links() {
		runs = append(runs, link.Runs()...)
	}
	want := [][]string{{"before"}, {string(payload[:1000]), string(payload[1000:2000]), string(payload[2000:])}}
	if !slices.EqualFunc(runs, want, slices.Equal) {
		t.Fatalf("%d runs of %v datagrams, want the datagram before and then the segment's three", len(runs), lens(runs))
	}
}

// A run of hijacked DNS queries is answered query by query by the DNS
// service; none reaches an association.
func TestARunOfHijackedQueriesGoesToTheDNSService(t *testing.T) {
	svc := &fakeDNS{queries: make(chan []byte, 4)}
	conn := &fakeConnector{}
	l := newLab(t, Config{DNSHijack: true, DNS: func() DNS { return svc }}, conn)
	src, server := netip.AddrPortFrom(appV4, 40053), netip.MustParseAddrPort("203.0.113.53:53")
	takeAll(l.in, udpPacket(src, server, []byte("q1")), udpPacket(src, server, []byte("q2")), udpPacket(src, server, []byte("q3")))
	var got []string
	for range 3 {
		select {
		case q := <-svc.queries:
			got = append(got, string(q))
		case <-time.After(5 * time.Second):
			t.Fatalf("the service got only %q", got)
		}
	}
	slices.Sort(got)
	if want := []string{"q1", "q2", "q3"}; !slices.Equal(got, want) || len(conn.Flows()) != 0 {
		t.Fatalf("the service got %q, the connector %d flows", got, len(conn.Flows()))
	}
}

func lens(runs [][]string) []int {
	var n []int
	for _, r := range runs {
		n = append(n, len(r))
	}
	return n
}

func FuzzOffloaded(f *testing.F) {
	f.Add(append([]byte{0, unix.VIRTIO_NET_HDR_GSO_UDP_L4, 0, 0, 0xe8, 3, 20, 0, 6, 0}, ipv4UDP(make([]byte, 2500))...))
	f.Add(append([]byte{1, 0, 0, 0, 0, 0, 20, 0, 6, 0}, ipv4UDP([]byte("x"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < virtioHdrLen {
			return
		}
		h := parseVirtioHdr(b)
		p := b[virtioHdrLen:]
		n := len(p)
		offloaded(h, p, nil, func(d []byte, _ bool) {
			if len(d) > 65535 || len(d) > n+header.IPv6MinimumSize+header.UDPMinimumSize {
				t.Fatalf("a %d-byte packet out of %d bytes", len(d), n)
			}
		})
	})
}

// Any bytes read from an offloading device, one packet or several read
// in one go: the reader's batch takes them and hands on what it held
// without panicking.
func FuzzRawBatch(f *testing.F) {
	dg := udpPacket(netip.AddrPortFrom(appV4, 40001), netip.MustParseAddrPort("198.51.100.1:7"), []byte("plain"))
	f.Add(append(make([]byte, virtioHdrLen), dg...), uint8(3))
	f.Add(append([]byte{0, unix.VIRTIO_NET_HDR_GSO_UDP_L4, 0, 0, 0xe8, 3, 20, 0, 6, 0}, ipv4UDP(make([]byte, 2500))...), uint8(1))
	f.Add(append([]byte{0, unix.VIRTIO_NET_HDR_GSO_TCPV4, 0, 0, 0xa8, 5, 20, 0, 6, 0}, []byte{0x45, 0, 0, 20}...), uint8(2))
	dev := tuntest.NewChannelTUN()
	in, err := run(Config{Tag: "t", MTU: 1500, MaxAssociations: 8}, dev.TUN(), &fakeConnector{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer in.Close()
	b := newRawBatch(in)
	f.Fuzz(func(t *testing.T, raw []byte, copies uint8) {
		if len(raw) < virtioHdrLen {
			return
		}
		for range copies % 8 {
			p := bytes.Clone(raw)
			b.take(parseVirtioHdr(p), p[virtioHdrLen:])
		}
		b.flush()
	})
}
