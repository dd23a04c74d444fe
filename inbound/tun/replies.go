package tun

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"switchyard/netx"
)

// Replies that arrive together go to the device together. A fan-out
// reader hands each reply of an association to its batch as it takes it
// off the socket and flushes the batch when the socket has no more
// waiting (netx.PacketBatch, netx.IdleNotifier). A run of replies from one
// peer, each as long as the first but the last (which may be shorter),
// is written as one packet that the kernel cuts into its datagrams (UDP
// segmentation offload, on a device opened with offloads, Linux 6.2 and
// later): one write, one pass through the kernel's IP input and no
// checksum computed here, where each datagram took all three. The
// application reads the same datagrams (or, on a socket with UDP_GRO,
// the run as one read, as from any GRO-capable device).
//
// A batch holds at most segMax datagrams and one packet's worth of bytes
// (the IP length field bounds it), in one pooled buffer, and only while
// its reader keeps finding replies waiting: a lone reply is written as
// soon as its reader finds the socket empty, as before. segMax is 64:
// Linux bounds the datagrams one packet is cut into (UDP_MAX_SEGMENTS,
// 64 when the offload came and no lower since), and 64 datagrams of a
// typical 1200–1400-byte QUIC size already fill most of the 64 KiB a
// packet can carry.
const segMax = 64

// replyBatch is one fan-out reader's run of replies to an association.
// Its reader's goroutine alone uses it.
type replyBatch struct {
	a     *association
	bp    *[]byte        // the payloads from packetOffset+udpHeaders on; nil while empty
	peer  netip.AddrPort // whom the run comes from
	seg   int            // the length of each datagram but the last
	n     int            // datagrams in the run
	size  int            // their bytes
	short bool           // the last is shorter than seg: nothing may follow it
}

// newBatch opens a batch for one reader of the association's link.
func (a *association) newBatch() netx.PacketBatch { return &replyBatch{a: a} }

// reply writes one reply a pushing link's reader received to the
// application. Readers of different sub-links call it at once, each with
// a buffer of its own.
func (a *association) reply(p []byte, from netx.Addr) {
	a.touch()
	peer, ok := a.sent.source(from, a.as.in.cfg.IsFake)
	if !ok {
		return
	}
	a.replyFrom(p, peer)
}

// replyFrom writes p to the application from peer, on its own.
func (a *association) replyFrom(p []byte, peer netip.AddrPort) {
	bp := netx.GetBuf(packetOffset + udpHeaders + len(p))
	defer netx.PutBuf(bp)
	buf := *bp
	if len(buf) < packetOffset+udpHeaders+len(p) {
		return // longer than any datagram a link delivers
	}
	a.writeFrom(buf, copy(buf[packetOffset+udpHeaders:], p), peer)
}

// Add takes one reply into the run, flushing the run first when the reply
// cannot join it.
func (b *replyBatch) Add(p []byte, from netx.Addr) {
	a := b.a
	in := a.as.in
	a.touch()
	peer, ok := a.sent.source(from, in.cfg.IsFake)
	if !ok {
		return
	}
	if !in.segment.Load() {
		a.replyFrom(p, peer)
		return
	}
	if b.n > 0 && !b.joins(p, peer) {
		b.Flush()
	}
	if b.n == 0 {
		if len(p) == 0 || len(p) > maxUDPPayload {
			a.replyFrom(p, peer) // no run starts with it
			return
		}
		b.bp = netx.GetBuf(netx.MaxBuf)
		b.peer, b.seg = peer, len(p)
	}
	copy((*b.bp)[packetOffset+udpHeaders+b.size:], p)
	b.n++
	b.size += len(p)
	b.short = len(p) < b.seg
	if b.n == segMax {
		b.Flush()
	}
}

// joins reports whether p from peer may follow the run: same peer, not
// longer than the run's datagrams, after none shorter, within one packet.
func (b *replyBatch) joins(p []byte, peer netip.AddrPort) bool {
	return peer == b.peer && !b.short && len(p) > 0 && len(p) <= b.seg &&
		b.size+len(p) <= maxUDPPayload
}

// Flush writes the run: one datagram as it is, more as one segmented
// packet, or, if the kernel refuses that, each on its own.
func (b *replyBatch) Flush() {
	if b.n == 0 {
		return
	}
	a := b.a
	in := a.as.in
	buf := *b.bp
	defer func() {
		netx.PutBuf(b.bp)
		b.bp, b.n, b.size, b.short = nil, 0, 0, false
	}()
	if b.n > 1 && in.segment.Load() {
		pkt, hlen, ok := buildSegmented(buf, b.peer, a.src, b.seg, b.size, b.n, in.cfg.MTU)
		if !ok {
			return // an IPv6 peer of an IPv4 application, or over the MTU: as for one
		}
		err := in.writeSegmented(pkt, hlen, b.seg)
		if !errors.Is(err, unix.EINVAL) {
			return
		}
		if in.segment.Swap(false) {
			in.log.Debug("tun: the kernel refuses UDP segmentation offload on the device: replies go one by one", "error", err)
		}
	}
	// Each datagram's headers go in front of its payload, over the end of
	// the one before, which is written by then.
	for off := 0; off < b.size; off += b.seg {
		a.writeFrom(buf[off:], min(b.seg, b.size-off), b.peer)
	}
}

// writeSegmented writes pkt (with packetOffset bytes of headroom; its IP
// header hlen bytes long) to the device's file behind a virtio-net header
// that asks the kernel to cut it into datagrams of seg payload bytes and
// to finish each one's checksum.
func (in *Inbound) writeSegmented(pkt []byte, hlen, seg int) error {
	h := pkt[packetOffset-virtioHdrLen:]
	h[0] = virtioNeedsCsum
	h[1] = virtioGSOUDPL4
	binary.NativeEndian.PutUint16(h[2:], uint16(hlen+header.UDPMinimumSize)) // hdr_len
	binary.NativeEndian.PutUint16(h[4:], uint16(seg))                        // gso_size
	binary.NativeEndian.PutUint16(h[6:], uint16(hlen))                       // csum_start
	binary.NativeEndian.PutUint16(h[8:], 6)                                  // csum_offset: the UDP checksum
	_, err := in.rawOut.Write(h)
	if err != nil && !errors.Is(err, unix.EINVAL) && in.ctx.Err() == nil {
		in.log.Debug("tun device write failed", "error", err)
	}
	return err
}
