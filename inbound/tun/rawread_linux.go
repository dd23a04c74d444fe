package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"
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

// readRaw reads f until it closes, handing every packet to the stack.
func (in *Inbound) readRaw(f *os.File) {
	buf := make([]byte, virtioHdrLen+65535)
	var scratch []byte
	for {
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EBADFD) || in.ctx.Err() != nil {
				return
			}
			in.log.Error("tun device read failed: the inbound stops", "error", err)
			in.cancel()
			return
		}
		if n < virtioHdrLen {
			continue
		}
		scratch = in.received(parseVirtioHdr(buf), buf[virtioHdrLen:n], scratch)
	}
}

// received hands one packet read with its virtio-net header to the stack
// (an ICMP echo request excepted, icmp.go; a plain UDP datagram goes to
// its association, fastudp.go). scratch is room for the
// datagrams of a UDP segment, returned for the next one.
func (in *Inbound) received(h virtioHdr, p []byte, scratch []byte) []byte {
	if h.gsoType == unix.VIRTIO_NET_HDR_GSO_NONE && in.echo(p) {
		return scratch
	}
	scratch, err := offloaded(h, p, scratch, in.injectFn)
	if err != nil {
		in.log.Debug("tun: dropping a packet from the device", "error", err, "length", len(p))
	}
	return scratch
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
// they are built in, grown as needed and returned.
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
	if cap(scratch) < hl+size {
		scratch = make([]byte, hl+size)
	}
	var id uint16
	if v == 4 {
		id = header.IPv4(p).ID()
	}
	for off, i := hl, 0; off < len(p); off, i = off+size, i+1 {
		end := min(off+size, len(p))
		d := scratch[:hl+end-off]
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
