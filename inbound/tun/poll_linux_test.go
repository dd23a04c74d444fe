package tun

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"switchyard/fanout"
	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/direct"
	"switchyard/plane"
	"switchyard/track"
)

// pairDevice is a device opened with offloads whose file is one end of a
// SOCK_SEQPACKET pair: each message is one packet with its virtio-net
// header, as the kernel's device reads and takes them.
type pairDevice struct {
	f      *os.File
	events chan tun.Event
	once   sync.Once
}

func (d *pairDevice) File() *os.File { return d.f }
func (d *pairDevice) Read([][]byte, []int, int) (int, error) {
	return 0, errors.New("pairDevice is read through its file")
}
func (d *pairDevice) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if _, err := d.f.Write(append(make([]byte, virtioHdrLen), b[offset:]...)); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}
func (d *pairDevice) MTU() (int, error)        { return 1500, nil }
func (d *pairDevice) Name() (string, error)    { return "pair0", nil }
func (d *pairDevice) Events() <-chan tun.Event { return d.events }
func (d *pairDevice) BatchSize() int           { return rawBatchPackets }
func (d *pairDevice) Close() error {
	d.once.Do(func() { close(d.events) })
	return d.f.Close()
}

// directConnector routes every association through fan-outs to a direct
// outbound, as the supervisor's does.
type directConnector struct {
	cell    *plane.Cell
	tracker *track.Tracker
}

func (directConnector) ConnectStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams here")
}

func (c directConnector) OpenAssociation(f netx.Flow) netx.PacketLink {
	return fanout.New(c.cell, f, c.tracker, nil)
}

// seqpacketPair is a non-blocking SOCK_SEQPACKET pair, each message one
// packet: the first end stands for the device's file, the second for the
// application's side. Both close when the test ends.
func seqpacketPair(t *testing.T) (dev, app *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	dev, app = os.NewFile(uintptr(fds[0]), "device"), os.NewFile(uintptr(fds[1]), "app")
	t.Cleanup(func() { dev.Close(); app.Close() })
	return dev, app
}

// udp4Packet is an IPv4 UDP packet (no UDP checksum) behind a zero
// virtio-net header.
func udp4Packet(src, dst netip.AddrPort, payload []byte) []byte {
	p := make([]byte, virtioHdrLen+header.IPv4MinimumSize+header.UDPMinimumSize+len(payload))
	ip := header.IPv4(p[virtioHdrLen:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(p) - virtioHdrLen), TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(src.Addr().As4()), DstAddr: tcpip.AddrFrom4(dst.Addr().As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	u := header.UDP(ip[header.IPv4MinimumSize:])
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(header.UDPMinimumSize + len(payload))})
	copy(u[header.UDPMinimumSize:], payload)
	return p
}

// On a device read through its file, one goroutine (netx.Poller) reads
// the device and the direct sockets of every association: no reader
// goroutine of the device's, none per sub-link, and every datagram's
// reply reaches its application.
func TestTheDeviceAndItsDirectSocketsShareOnePoller(t *testing.T) {
	devFile, app := seqpacketPair(t)
	dev := &pairDevice{f: devFile, events: make(chan tun.Event)}
	echoAddr := inboundtest.UDPEcho(t).LocalAddr().(*net.UDPAddr).AddrPort()

	out := direct.New(netx.Auto, outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 0)})
	tgt := plane.NewTarget(plane.OutboundID{Tag: "direct", Version: 1}, out)
	cell := new(plane.Cell)
	cell.Store(&plane.Plane{Epoch: 1, Final: tgt, Targets: map[string]*plane.Target{"direct": tgt}})
	in, err := run(Config{Tag: "tun-in", MTU: 1500}, dev, directConnector{cell, track.New()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.poller == nil {
		t.Fatal("no poller for a device read through its file")
	}

	const flows = 8
	for round := range 3 {
		want := map[string]bool{}
		for i := range flows {
			src := netip.AddrPortFrom(appV4, uint16(40000+i))
			payload := string(rune('a'+i)) + string(rune('0'+round))
			want[payload] = true
			if _, err := app.Write(udp4Packet(src, echoAddr, []byte(payload))); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 4096)
		app.SetReadDeadline(time.Now().Add(5 * time.Second))
		for len(want) > 0 {
			n, err := app.Read(buf)
			if err != nil {
				t.Fatalf("round %d: replies %v never came: %v", round, want, err)
			}
			pkt := header.IPv4(buf[virtioHdrLen:n])
			u := header.UDP(pkt.Payload())
			got := string(u.Payload())
			if !want[got] {
				t.Fatalf("round %d: unexpected reply %q", round, got)
			}
			if from := netip.AddrPortFrom(netip.AddrFrom4(pkt.SourceAddress().As4()), u.SourcePort()); from != echoAddr {
				t.Fatalf("reply from %v, want %v", from, echoAddr)
			}
			delete(want, got)
		}
	}
	stacks := make([]byte, 1<<20)
	s := string(stacks[:runtime.Stack(stacks, true)])
	for _, reader := range []string{"fanout.(*Link).read(", "tun.(*Inbound).readRaw(", "tun.(*Inbound).readDevice("} {
		if n := strings.Count(s, reader); n != 0 {
			t.Errorf("%d goroutines in %s", n, reader)
		}
	}
	if in.Associations() != flows {
		t.Errorf("%d associations, want %d", in.Associations(), flows)
	}
}
