package vmess

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	protocol "switchyard/protocol/vmess"
)

// frameReader reads what the server sends, a frame at a time, into one
// buffer, and opens it with the flow's decoder. The buffer starts at
// startBuf bytes and grows once to bufSize, when a frame needs the room or a
// read fills it: a flow that moves little holds little. A payload it
// returns lives in the buffer until the next call. A frame that must be
// held whole (a sealed chunk, a datagram, the response header) and does not
// fit the buffer fails the flow; a stream in clear chunks is passed on as it
// arrives, whatever its chunks' size.
//
// A read that times out leaves everything in place: the next call resumes
// the same frame. Any other failure, and the end of the body, are final.
//
// A releasing reader (a datagram link's) starts with a smaller buffer
// (releasingStart), takes its bufSize buffer from a pool, and gives it back, reading on in its small buffer, once
// everything read into it is decoded and passed on (when the next read
// starts) or reading ended: an idle link holds its small buffer alone.
type frameReader struct {
	conn    net.Conn
	dec     *protocol.Decoder
	buf     []byte
	r, w    int  // buf[r:w] is read and not yet decoded
	opened  bool // the response header was opened
	full    bool // the last read filled the small buffer: grow before the next
	err     error
	release bool    // the bufSize buffer is pooled, and given back when empty
	small   []byte  // the small buffer, while a releasing reader is grown
	pooled  *[]byte // the bufSize buffer of a releasing reader, while taken
}

// startBuf is the capacity a flow's buffers start with.
const startBuf = 4 << 10

// releasingStart is the small buffer of a releasing reader, which it keeps
// for good: a chunk of an MTU-sized datagram, and the response header, fit
// it whole.
const releasingStart = 2 << 10

func newFrameReader(c net.Conn, s *protocol.Session) frameReader {
	return frameReader{conn: c, dec: s.NewDecoder(), buf: make([]byte, startBuf)}
}

// newReleasingReader is a frameReader that holds its bufSize buffer only
// while it has bytes in it.
func newReleasingReader(c net.Conn, s *protocol.Session) frameReader {
	return frameReader{conn: c, dec: s.NewDecoder(), buf: make([]byte, releasingStart), release: true}
}

// next returns the next payload: one chunk's, or for an unframed body
// whatever has been read.
func (fr *frameReader) next() ([]byte, error) {
	defer fr.releaseIfDone()
	for fr.err == nil {
		frame, payload, err := fr.dec.Decode(fr.buf[fr.r:fr.w])
		switch {
		case err == io.EOF:
			fr.err = io.EOF
		case err != nil:
			fr.err = err
		case frame <= fr.w-fr.r:
			fr.r += frame
			fr.opened = true
			if len(payload) > 0 {
				return payload, nil
			}
		case frame > bufSize:
			fr.err = fmt.Errorf("vmess: %w (%d bytes)", proxyconn.ErrUpstreamFrameTooLarge, frame)
		default:
			if err := fr.fill(frame); err != nil {
				return nil, err
			}
		}
	}
	return nil, fr.err
}

// releaseIfDone gives a releasing reader's pooled buffer back once reading
// ended for good.
func (fr *frameReader) releaseIfDone() {
	if fr.err != nil && fr.pooled != nil {
		fr.r, fr.w = 0, 0
		fr.giveBack()
	}
}

// giveBack returns the pooled buffer, which holds nothing to keep, and
// reads on in the small one.
func (fr *frameReader) giveBack() {
	putStage(fr.pooled)
	fr.pooled = nil
	fr.buf, fr.small = fr.small, nil
}

// grow moves the undecoded bytes to a buffer of bufSize: a pooled one for a
// releasing reader, a new one kept for good otherwise.
func (fr *frameReader) grow() {
	var b []byte
	if fr.release {
		fr.pooled = largeStages.Get().(*[]byte)
		b = (*fr.pooled)[:bufSize]
		fr.small = fr.buf
	} else {
		b = make([]byte, bufSize)
	}
	fr.w = copy(b, fr.buf[fr.r:fr.w])
	fr.r = 0
	fr.buf = b
}

// buffered returns the next payload when its whole frame is already in the
// buffer, and nil otherwise; it never reads from the upstream. A failure or
// the end of the body is kept for next to return.
func (fr *frameReader) buffered() []byte {
	for fr.err == nil && fr.r < fr.w {
		frame, payload, err := fr.dec.Decode(fr.buf[fr.r:fr.w])
		switch {
		case err != nil:
			fr.err = err
		case frame > fr.w-fr.r:
			return nil
		default:
			fr.r += frame
			fr.opened = true
			if len(payload) > 0 {
				return payload
			}
		}
	}
	return nil
}

// fill reads once from the upstream, for a frame of frame bytes from r,
// first moving the undecoded bytes to the front of the buffer when the frame
// would not fit after them. A releasing reader with nothing undecoded gives
// its pooled buffer back first: what it passed on is no longer used.
func (fr *frameReader) fill(frame int) error {
	if fr.r == fr.w {
		fr.r, fr.w = 0, 0
		if fr.pooled != nil {
			fr.giveBack()
		}
	}
	frameEnd := fr.r + frame
	if len(fr.buf) < bufSize && (fr.full || frame > len(fr.buf)) {
		fr.grow()
		fr.full = false
	} else if frameEnd > len(fr.buf) {
		fr.w = copy(fr.buf, fr.buf[fr.r:fr.w])
		fr.r = 0
	}
	n, err := fr.conn.Read(fr.buf[fr.w:])
	fr.w += n
	fr.full = fr.w == len(fr.buf) && len(fr.buf) < bufSize
	if n > 0 || err == nil {
		return nil
	}
	return fr.fail(err)
}

// fail turns a read error into the flow's error: a timeout is returned as it
// is and leaves the flow open; an end of the upstream is a clean end only
// between two frames of an open body. An end before the response header
// opened tells, by its fault, whether any byte of it came
// (netx.FaultVMessBadHeader) or none (netx.FaultVMessEOFBeforeHeader): only
// the second can be the server closing on a target it could not reach.
func (fr *frameReader) fail(err error) error {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return err
	case err == io.EOF && !fr.opened && fr.w == 0:
		fr.err = netx.WithFault(fmt.Errorf("vmess: %w", proxyconn.ErrHandshakeClosed), netx.FaultVMessEOFBeforeHeader)
	case err == io.EOF && !fr.opened:
		fr.err = netx.WithFault(fmt.Errorf("vmess: %w", proxyconn.ErrHandshakeClosed), netx.FaultVMessBadHeader)
	case err == io.EOF && (fr.r < fr.w || fr.dec.Mid()):
		fr.err = fmt.Errorf("vmess: %w", proxyconn.ErrFrameClosed)
	default:
		fr.err = err
	}
	return fr.err
}

// readRaw serves an unframed body straight into p once the bytes read
// beyond the response header are used up.
func (fr *frameReader) readRaw(p []byte) (int, error) {
	if fr.err != nil {
		return 0, fr.err
	}
	if fr.r < fr.w {
		n := copy(p, fr.buf[fr.r:fr.w])
		fr.r += n
		return n, nil
	}
	n, err := fr.conn.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		fr.err = err
	}
	return n, err
}
