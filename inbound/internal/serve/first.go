package serve

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"switchyard/route/sniff"
)

// SniffWait is how long an inbound waits for a client's first bytes when it
// sniffs them.
const SniffWait = 300 * time.Millisecond

// maxFirst bounds the first bytes read for sniffing: one whole TLS record,
// which holds any common ClientHello.
const maxFirst = 5 + 16<<10

var firstPool = sync.Pool{New: func() any { b := make([]byte, maxFirst); return &b }}

// First is what a client sent first, and what it sniffs to. Release returns
// its buffer once the bytes have been passed on.
type First struct {
	Protocol string // "tls", "http" or ""
	Domain   string // the server name or host, "" when none
	data     []byte
	buf      *[]byte
}

// Bytes returns the bytes read; they must reach the upstream before the
// relay starts.
func (f *First) Bytes() []byte { return f.data }

// Release returns the buffer to the pool; Bytes must not be used after.
func (f *First) Release() {
	if f.buf != nil {
		firstPool.Put(f.buf)
		f.buf, f.data = nil, nil
	}
}

// ReadFirst sniffs a client's first bytes: head (bytes already read from c)
// and what c sends next, read until they sniff to a result or can no longer,
// the buffer is full, the client ends its side, or wait has passed. It
// clears c's read deadline before it returns. A read error other than a
// timeout or EOF is returned; the connection is then unusable.
func ReadFirst(c net.Conn, head []byte, wait time.Duration) (*First, error) {
	f := &First{}
	if len(head) >= maxFirst {
		f.data = head
		f.Protocol, f.Domain = sniff.Sniff(head)
		return f, nil
	}
	f.buf = firstPool.Get().(*[]byte)
	buf := *f.buf
	n := copy(buf, head)
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		f.Release()
		return nil, err
	}
	for n < len(buf) && sniff.NeedMore(buf[:n]) {
		m, err := c.Read(buf[n:])
		n += m
		if err == io.EOF || errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			f.Release()
			return nil, err
		}
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		f.Release()
		return nil, err
	}
	f.data = buf[:n]
	f.Protocol, f.Domain = sniff.Sniff(f.data)
	return f, nil
}
