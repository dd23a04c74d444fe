// Package xudp is the client side of XUDP: one UDP association carried as
// one Mux.Cool session over an established stream (a VLESS or VMess Mux
// stream), whose packets each name their own peer.
package xudp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/protocol/mux"
)

// ErrSessionError is the end of a session the server marked failed. The
// link fails with it under netx.FaultXUDPEnd and an episode of its own: the
// session is a source shared by every peer it carried, and each flow bound
// to it reports that one failure.
var ErrSessionError = errors.New("xudp: the server ended the session with an error")

// MaxPacket is the largest datagram one XUDP frame carries, as Xray's client
// sends them: its server reads a frame's data into one 8 KiB buffer and
// drops a longer one. A longer datagram is refused with ErrFrameTooLarge.
const MaxPacket = 8192

// IDs derives the global IDs of one outbound's associations. It lives as
// long as the outbound, so a source keeps its ID across links.
type IDs struct {
	key [mux.GlobalIDKeyLen]byte
}

// NewIDs draws a fresh key.
func NewIDs() *IDs {
	ids := &IDs{}
	rand.Read(ids.key[:])
	return ids
}

// For is the global ID of the association of src: derived from it, or drawn
// at random when the association has no source.
func (ids *IDs) For(src netip.AddrPort) [8]byte {
	if src.IsValid() {
		return mux.GlobalID(&ids.key, src)
	}
	var gid [8]byte
	rand.Read(gid[:])
	return gid
}

// link is one XUDP session: the first packet opens it (a New frame with the
// association's global ID), every later one is a Keep frame; each frame,
// both ways, names its peer.
type link struct {
	*proxyconn.Link
	f *framing
}

// NewLink returns the XUDP link over c, a stream whose bytes go to and come
// from Mux.Cool. target is the destination of the packet that opens the
// link: a reply naming no peer is attributed to it. bufSize and reserve size
// the link's buffers as proxyconn.NewLink does; a datagram is at most
// MaxPacket bytes whatever their size.
func NewLink(c net.Conn, target netx.Addr, gid [8]byte, bufSize, reserve int) netx.PacketLink {
	f := &framing{target: target, gid: gid}
	return &link{Link: proxyconn.NewLink(c, f, bufSize, reserve), f: f}
}

// WritePacket sends p to peer; the first packet written opens the session.
func (l *link) WritePacket(p []byte, peer netx.Addr) error {
	if len(p) > MaxPacket {
		return fmt.Errorf("xudp: %w (a datagram of %d bytes; a frame carries %d)", proxyconn.ErrFrameTooLarge, len(p), MaxPacket)
	}
	if err := l.Link.WritePacket(p, peer); err != nil {
		return err
	}
	l.f.opened = true
	return nil
}

// framing is XUDP's Mux.Cool frames.
type framing struct {
	target netx.Addr
	gid    [8]byte
	opened bool       // writer side: the New frame was sent
	parser mux.Parser // reader side
}

func (f *framing) AppendFrame(dst, p []byte, peer netx.Addr) ([]byte, error) {
	fr := mux.Frame{
		Session: mux.XUDPSession,
		Status:  mux.StatusKeep,
		Option:  mux.OptionData,
		Network: mux.NetworkUDP,
		Target:  peer,
		Data:    p,
	}
	if !f.opened {
		fr.Status, fr.GlobalID = mux.StatusNew, f.gid
	}
	return mux.AppendFrame(dst, &fr)
}

func (*framing) FrameLen(b []byte) (int, error) { return mux.FrameLen(b) }

// OpenFrame returns the packet of a Keep frame with data. Keep-alive frames,
// frames without data and frames of other sessions carry none; the
// session's end is io.EOF, or ErrSessionError when the server marked it
// failed.
func (f *framing) OpenFrame(frame []byte) ([]byte, netx.Addr, bool, error) {
	fr, err := f.parser.Parse(frame)
	if err != nil {
		return nil, netx.Addr{}, false, err
	}
	if fr.Session != mux.XUDPSession {
		return nil, netx.Addr{}, false, nil
	}
	switch fr.Status {
	case mux.StatusKeep:
		if fr.Option&mux.OptionData == 0 {
			return nil, netx.Addr{}, false, nil
		}
		from := f.target
		if fr.Network == mux.NetworkUDP {
			from = fr.Target
		}
		return fr.Data, from, true, nil
	case mux.StatusKeepAlive:
		return nil, netx.Addr{}, false, nil
	case mux.StatusEnd:
		if fr.Option&mux.OptionError != 0 {
			return nil, netx.Addr{}, false, netx.WithEpisode(ErrSessionError, netx.FaultXUDPEnd, netx.NewEpisode())
		}
		return nil, netx.Addr{}, false, io.EOF
	}
	return nil, netx.Addr{}, false, netx.WithFault(fmt.Errorf("xudp: the server sent a %s frame", fr.Status), netx.FaultFraming)
}
