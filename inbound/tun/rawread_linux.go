package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"switchyard/netx"
)

// A device opened with offloads (the virtio-net header before each packet,
// which the device reports as a batch size above 1) is read here rather
// than through the device's Read, which cuts every segment the kernel
// offloaded (GSO) into MTU-sized packets, each with its checksum computed,
// that the stack then coalesces again. A TCP segment up to 64 KiB goes to
// the stack whole, with its lengths set and its checksum trusted: it comes
// from the kernel, which left the checksum to the offload. A UDP one is
// cut into its datagrams, each a packet, since every datagram is a message
// of its own.

// virtioHdr is the part of the header read here.
type virtioHdr struct {
	flags, gsoType byte
	gsoSize        uint16
	csumStart      uint16
}

func parseVirtioHdr(b []byte) virtioHdr {
	return virtioHdr{flags: b[0], gsoType: b[1], gsoSize: binary.NativeEndian.Uint16(b[4:]), csumStart: binary.NativeEndian.Uint16(b[6:])}
}

// rawFile is the device's file when it is read here.
func rawFile(dev interface{ BatchSize() int }) (*os.File, bool) {
	f, ok := dev.(interface{ File() *os.File })
	if !ok || dev.BatchSize() <= 1 {
		return nil, false
	}
	return f.File(), true
}

// deviceWriter is the writer of f, the device's file: one raw write a
// packet (netx.NonblockingWriter; the device is non-blocking), or f's own
// writes if it has no descriptor.
func deviceWriter(f *os.File) io.Writer {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	return netx.NonblockingWriter(rc)
}

// segmentationOffload reports whether the kernel cuts a UDP packet written
// to f with the virtio-net header's UDP segmentation offload into its
// datagrams (Linux 6.2 and later): it does when it takes the offload flags
// that include USO, the ones the device was opened with.
func segmentationOffload(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD,
			unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6|unix.TUN_F_USO4|unix.TUN_F_USO6)
	})
	return err == nil && serr == nil
}

// readRaw reads f until it closes, handing every packet to the stack or,
// a plain UDP datagram, to its association. Packets already waiting are
// read in one go (up to rawBatchPackets, into an arena of rawArena bytes)
// and their plain datagrams held: once the device has none waiting, each
// association is handed its datagrams to a destination as one run, which
// its socket sends in one system call (netx.PacketBatchWriter). A packet
// that arrives alone, after the reader waited for it, is handed on at
// once: the device is read again only when it was found busy, so a flow
// with one packet in flight costs no more reads than before.
func (in *Inbound) readRaw(f *os.File) {
	r, err := newRawReader(in, f, false)
	if err != nil {
		in.rawReadFailed(err)
		return
	}
	for {
		if err := r.turn(); err != nil {
			in.rawReadFailed(err)
			return
		}
	}
}

// pollRaw has p read f, the device's file, on its goroutine, which also
// reads the associations' direct sockets (netx.Poller): each turn reads
// what is waiting, up to rawBatchPackets packets.
func (in *Inbound) pollRaw(p *netx.Poller, f *os.File) error {
	r, err := newRawReader(in, f, true)
	if err != nil {
		return err
	}
	_, err = p.Watch(r.rc, func([]byte) bool {
		if err := r.turn(); err != nil {
			in.rawReadFailed(err)
			return false
		}
		return true
	})
	return err
}

// rawReadFailed ends the device's reading: quietly when the device
// closed, else with an error line, and the inbound stops.
func (in *Inbound) rawReadFailed(err error) {
	if errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EBADFD) || in.ctx.Err() != nil {
		return
	}
	in.log.Error("tun device read failed: the inbound stops", "error", err)
	in.cancel()
}

// rawReader is the device's reader: its fields carry a read's state
// through RawConn.Read, whose function is made once.
type rawReader struct {
	in    *Inbound
	rc    syscall.RawConn
	fn    func(fd uintptr) bool
	arena []byte
	b     *rawBatch
	pkts  [][]byte
	// polled: a Poller calls turn when the device is readable, and the
	// read never waits.
	polled  bool
	waited  bool // the device had nothing waiting: a packet arrives alone
	readErr error
}

func newRawReader(in *Inbound, f *os.File, polled bool) (*rawReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &rawReader{
		in: in, rc: rc, arena: make([]byte, rawArena), b: newRawBatch(in),
		pkts: make([][]byte, 0, rawBatchPackets), polled: polled,
	}
	r.fn = r.read
	return r, nil
}

func (r *rawReader) read(fd uintptr) bool {
	for off := 0; len(r.pkts) < rawBatchPackets && len(r.arena)-off >= virtioHdrLen+65535; {
		n, err := netx.ReadNonblocking(fd, r.arena[off:]) // raw: the device is non-blocking
		switch {
		case err == unix.EAGAIN:
			if len(r.pkts) == 0 && !r.polled {
				r.waited = true
				return false // wait until the device is readable
			}
			return true
		case err != nil:
			r.readErr = err
			return true
		}
		r.pkts = append(r.pkts, r.arena[off:off+n])
		off += n
		if r.waited {
			return true
		}
	}
	return true
}

// turn reads the packets waiting (the goroutine's reader waits for the
// first) and hands each on; it returns the read's error.
func (r *rawReader) turn() error {
	r.pkts, r.waited = r.pkts[:0], false
	err := r.rc.Read(r.fn)
	for _, p := range r.pkts {
		if len(p) >= virtioHdrLen {
			r.b.take(parseVirtioHdr(p), p[virtioHdrLen:])
		}
	}
	clear(r.pkts)
	r.b.flush()
	if err == nil {
		err, r.readErr = r.readErr, nil
	}
	return err
}

const (
	// rawBatchPackets bounds the packets read in one go and the datagrams
	// held for their associations; it is also the most segments the
	// kernel takes in one send (netx.PacketBatchWriter).
	rawBatchPackets = 64
	// rawArena is the room the packets read in one go share: each read
	// needs room for the largest packet, so four of them fit, or 64 of a
	// usual MTU.
	rawArena = 4 * (virtioHdrLen + 65535)
)

// rawBatch holds the plain UDP datagrams of the packets read in one go
// (their payloads in place in the reader's arena or scratch) until flush
// hands them to their associations, a run per source and destination.
type rawBatch struct {
	in      *Inbound
	emit    func(p []byte, validated bool) // inject, made once
	scratch []byte                         // the datagrams of a UDP segment
	held    []heldDatagram
	run     [][]byte
}

func newRawBatch(in *Inbound) *rawBatch {
	b := &rawBatch{in: in}
	b.emit = b.inject
	return b
}

type heldDatagram struct {
	src, dst netip.AddrPort
	payload  []byte
	taken    bool // handed on in an earlier run of the flush
}

// take handles one packet read with its virtio-net header: an ICMP echo
// request is answered (icmp.go), a plain UDP datagram held, anything
// else goes to the stack. The datagrams of a UDP segment are built in
// scratch and handed on before the next packet, which reuses it.
func (b *rawBatch) take(h virtioHdr, p []byte) {
	if h.gsoType == unix.VIRTIO_NET_HDR_GSO_NONE && b.in.echo(p) {
		return
	}
	segment := h.gsoType == unix.VIRTIO_NET_HDR_GSO_UDP_L4
	if segment {
		b.flush()
	}
	var err error
	b.scratch, err = offloaded(h, p, b.scratch, b.emit)
	if err != nil {
		b.in.log.Debug("tun: dropping a packet from the device", "error", err, "length", len(p))
	}
	if segment {
		b.flush()
	}
}

// inject holds p when it is a plain UDP datagram and hands it to the
// stack otherwise: after the datagrams held so far unless it is TCP, so
// that a datagram that takes the stack's way (a fragment) does not pass
// those of its association held before it.
func (b *rawBatch) inject(p []byte, validated bool) {
	if src, dst, payload, ok := plainUDP(p, validated); ok {
		if len(b.held) == rawBatchPackets {
			b.flush()
		}
		b.held = append(b.held, heldDatagram{src: src, dst: dst, payload: payload})
		return
	}
	if !isTCP(p) {
		b.flush()
	}
	b.in.stack.InjectReceived(p, validated)
}

// flush hands every held datagram on: those of one source to one
// destination as one run, in the order they were read, the runs in the
// order of their first datagram.
func (b *rawBatch) flush() {
	for i := range b.held {
		first := &b.held[i]
		if first.taken {
			continue
		}
		run := append(b.run[:0], first.payload)
		for j := i + 1; j < len(b.held); j++ {
			if d := &b.held[j]; !d.taken && d.src == first.src && d.dst == first.dst {
				run = append(run, d.payload)
				d.taken = true
			}
		}
		b.in.datagrams(first.src, first.dst, run)
		clear(run)
		b.run = run[:0]
	}
	clear(b.held)
	b.held = b.held[:0]
}

// isTCP reports whether p is an IP packet that carries TCP right after
// its fixed header.
func isTCP(p []byte) bool {
	switch {
	case len(p) >= header.IPv4MinimumSize && p[0]>>4 == 4:
		return p[9] == uint8(header.TCPProtocolNumber)
	case len(p) >= header.IPv6MinimumSize && p[0]>>4 == 6:
		return p[6] == uint8(header.TCPProtocolNumber)
	}
	return false
}

// offloaded hands to emit the packets of p, read with the header h: p
// itself, with its lengths set when it is a TCP segment, or the datagrams
// of a UDP segment, built in scratch (grown as needed and returned). The
// packet's transport checksum is trusted when the kernel left it to the
// offload.
func offloaded(h virtioHdr, p []byte, scratch []byte, emit func(p []byte, validated bool)) ([]byte, error) {
	// ECN on an offloaded TCP segment changes nothing here.
	switch h.gsoType &^ unix.VIRTIO_NET_HDR_GSO_ECN {
	case unix.VIRTIO_NET_HDR_GSO_NONE:
		emit(p, h.flags&unix.VIRTIO_NET_HDR_F_NEEDS_CSUM != 0)
	case unix.VIRTIO_NET_HDR_GSO_TCPV4, unix.VIRTIO_NET_HDR_GSO_TCPV6:
		if !setLengths(p) {
			return scratch, errors.New("an offloaded TCP segment that does not parse")
		}
		emit(p, true)
	case unix.VIRTIO_NET_HDR_GSO_UDP_L4:
		return splitUDP(p, int(h.csumStart), int(h.gsoSize), scratch, func(d []byte) { emit(d, true) })
	default:
		return scratch, fmt.Errorf("unknown offload %d", h.gsoType)
	}
	return scratch, nil
}

// setLengths sets the IP lengths of a whole packet p (and the IPv4 header
// checksum); false when p is not an IP packet whose length fits.
func setLengths(p []byte) bool {
	if len(p) < 1 || len(p) > 65535 {
		return false
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < header.IPv4MinimumSize {
			return false
		}
		ip := header.IPv4(p)
		if int(ip.HeaderLength()) < header.IPv4MinimumSize || int(ip.HeaderLength()) > len(p) {
			return false
		}
		ip.SetTotalLength(uint16(len(p)))
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	case 6:
		if len(p) < header.IPv6MinimumSize {
			return false
		}
		header.IPv6(p).SetPayloadLength(uint16(len(p) - header.IPv6MinimumSize))
	default:
		return false
	}
	return true
}

// splitUDP cuts the UDP segment p, whose UDP header is at l4, into
// datagrams of size bytes of payload (the last one shorter), each with
// its own IP and UDP headers, and hands each to emit. scratch is the room
// they are built in, one after the other, grown as needed and returned:
// every datagram stays as emitted until scratch is used again.
func splitUDP(p []byte, l4, size int, scratch []byte, emit func([]byte)) ([]byte, error) {
	hl := l4 + header.UDPMinimumSize
	errBad := errors.New("an offloaded UDP segment that does not parse")
	if size <= 0 || l4 < header.IPv4MinimumSize || hl > len(p) {
		return scratch, errBad
	}
	v := p[0] >> 4
	if v != 4 && v != 6 || v == 6 && l4 < header.IPv6MinimumSize || v == 4 && int(header.IPv4(p).HeaderLength()) != l4 {
		return scratch, errBad
	}
	segments := (len(p) - hl + size - 1) / size
	if need := segments*hl + len(p) - hl; cap(scratch) < need {
		scratch = make([]byte, need)
	}
	var id uint16
	if v == 4 {
		id = header.IPv4(p).ID()
	}
	at := 0
	for off, i := hl, 0; off < len(p); off, i = off+size, i+1 {
		end := min(off+size, len(p))
		d := scratch[at : at+hl+end-off : at+hl+end-off]
		at += len(d)
		copy(d, p[:hl])
		copy(d[hl:], p[off:end])
		if v == 4 {
			ip := header.IPv4(d)
			ip.SetID(id + uint16(i))
		}
		if !setLengths(d) {
			return scratch, errBad
		}
		u := header.UDP(d[l4:])
		u.SetLength(uint16(len(d) - l4))
		u.SetChecksum(0) // not checked: the datagram goes in trusted (InjectReceived)
		emit(d)
	}
	return scratch, nil
}
