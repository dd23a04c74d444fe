package vless

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"switchyard/netx"
	"switchyard/protocol/mux"
	codec "switchyard/protocol/vless"
)

// errSessionError is the end of an XUDP session the server marked failed.
var errSessionError = errors.New("xudp: the server ended the session with an error")

// xudpLink is one XUDP session over a VLESS Mux.Cool stream: the first
// packet opens the session (a New frame with the association's global ID),
// every later one is a Keep frame; each frame, both ways, names its peer.
// WritePacket, ReadPacket and Close may each run on their own goroutine.
type xudpLink struct {
	conn net.Conn
	// target is the destination of the packet that opened the link; a reply
	// naming no peer is attributed to it.
	target netx.Addr
	gid    [8]byte

	// Writer side.
	stage  []byte
	opened bool // the New frame was sent

	// Reader side.
	r      frameReader
	parser mux.Parser

	closeOnce sync.Once
	closeErr  error
}

var _ netx.PacketLink = (*xudpLink)(nil)

func newXUDPLink(c net.Conn, target netx.Addr, gid [8]byte) *xudpLink {
	return &xudpLink{
		conn:   c,
		target: target,
		gid:    gid,
		stage:  make([]byte, 0, BufSize),
		r:      frameReader{br: bufio.NewReaderSize(c, BufSize)},
	}
}

// WritePacket sends p to peer in one frame and one write. A packet whose
// payload and the request header's reserve exceed the buffer is refused.
func (l *xudpLink) WritePacket(p []byte, peer netx.Addr) error {
	if len(p)+codec.RequestHeaderMax > BufSize {
		return errDatagramTooLarge
	}
	f := mux.Frame{
		Session: mux.XUDPSession,
		Status:  mux.StatusKeep,
		Option:  mux.OptionData,
		Network: mux.NetworkUDP,
		Target:  peer,
		Data:    p,
	}
	if !l.opened {
		f.Status, f.GlobalID = mux.StatusNew, l.gid
	}
	b, err := mux.AppendFrame(l.stage[:0], &f)
	if err != nil {
		return err
	}
	if _, err := l.conn.Write(b); err != nil {
		return err
	}
	l.opened = true
	return nil
}

// ReadPacket returns the next packet of the session, truncated to p, with
// the peer it came from. Keep-alive frames, frames without data and frames
// of other sessions are skipped; the session's end is io.EOF, or
// errSessionError when the server marked it failed.
func (l *xudpLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	for {
		frame, err := l.r.next(mux.FrameLen)
		if err != nil {
			return 0, netx.Addr{}, err
		}
		f, err := l.parser.Parse(frame)
		if err != nil {
			return 0, netx.Addr{}, l.r.fail(err)
		}
		if f.Session != mux.XUDPSession {
			l.r.consume(len(frame))
			continue
		}
		switch f.Status {
		case mux.StatusKeep:
			if f.Option&mux.OptionData == 0 {
				break
			}
			from := l.target
			if f.Network == mux.NetworkUDP {
				from = f.Target
			}
			n := copy(p, f.Data)
			l.r.consume(len(frame))
			return n, from, nil
		case mux.StatusKeepAlive:
		case mux.StatusEnd:
			if f.Option&mux.OptionError != 0 {
				return 0, netx.Addr{}, l.r.fail(errSessionError)
			}
			return 0, netx.Addr{}, l.r.fail(io.EOF)
		default:
			return 0, netx.Addr{}, l.r.fail(fmt.Errorf("xudp: the server sent a %s frame", f.Status))
		}
		l.r.consume(len(frame))
	}
}

// Close closes the server connection, which ends a blocked ReadPacket.
func (l *xudpLink) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}
