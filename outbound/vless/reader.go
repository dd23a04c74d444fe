package vless

import (
	"bufio"
	"errors"
	"io"
	"os"

	codec "switchyard/protocol/vless"
)

// frameReader reads a datagram link's frames from the server: the response
// header first, then frames as the link's decoder sizes them. It belongs to
// the one goroutine that reads the link.
type frameReader struct {
	br   *bufio.Reader
	resp bool  // the response header was read
	bad  error // the error that ended reading; final
}

// next returns the next whole frame; the bytes stay valid until consume.
func (r *frameReader) next(frameLen func([]byte) (int, error)) ([]byte, error) {
	if r.bad != nil {
		return nil, r.bad
	}
	if !r.resp {
		hdr, err := peekFrame(r.br, codec.ResponseLen)
		if err == io.EOF || errors.Is(err, errFrameEOF) {
			err = errHandshakeEOF
		}
		if err != nil {
			return nil, r.fail(err)
		}
		r.br.Discard(len(hdr))
		r.resp = true
	}
	frame, err := peekFrame(r.br, frameLen)
	if err != nil {
		return nil, r.fail(err)
	}
	return frame, nil
}

// fail makes err final unless it is a deadline that passed, after which
// reading may go on where it stopped.
func (r *frameReader) fail(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		r.bad = err
	}
	return err
}

// consume drops the frame next returned, n bytes long.
func (r *frameReader) consume(n int) { r.br.Discard(n) }
