package trojan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// BufSize (TROJAN_BUF) sizes both buffers of a datagram link: the staging
// buffer toward the server and the read buffer from it. It bounds one frame
// each way.
const BufSize = 16 * 1024

// The client runtime's errors, with the texts every proxy client shares.
var (
	errFrameTooLarge    = errors.New("upstream frame larger than the client runtime's buffer")
	errDatagramTooLarge = errors.New("frame larger than the client runtime's buffer")
	errFrameEOF         = fmt.Errorf("upstream closed inside a frame: %w", io.ErrUnexpectedEOF)
)

// peekFrame returns the next whole frame buffered in br, as frameLen sizes
// it; the bytes stay valid until br is read again, and the caller discards
// them once used. A frame that cannot fit br's buffer is errFrameTooLarge;
// an end of stream before the first byte of a frame is io.EOF, inside one
// errFrameEOF. frameLen's own error (bad bytes from the server) is returned
// as it is.
func peekFrame(br *bufio.Reader, frameLen func([]byte) (int, error)) ([]byte, error) {
	need := 1
	for {
		if n := br.Buffered(); n > need {
			need = n
		}
		b, err := br.Peek(need)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, errFrameTooLarge
		case err == io.EOF && len(b) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errFrameEOF
		case err != nil:
			return nil, err
		}
		n, err := frameLen(b)
		if err != nil {
			return nil, err
		}
		if n <= len(b) {
			return b[:n], nil
		}
		need = n
	}
}

// longAgo is a deadline already past: setting it wakes blocked I/O.
var longAgo = time.Unix(1, 0)

// within runs a handshake step on c bound to ctx: c carries ctx's deadline
// while fn runs and an already-past one as soon as ctx is cancelled; the
// deadline is cleared afterwards. When ctx ended before fn finished, its
// cause is the error.
func within(ctx context.Context, c net.Conn, fn func() error) error {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.SetDeadline(longAgo)
		close(fired)
	})
	err := fn()
	if !stop() {
		<-fired
		if err == nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	c.SetDeadline(time.Time{})
	return err
}
