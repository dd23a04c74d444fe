package transport

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// xhPipe is a bounded byte buffer between one writing and one reading
// goroutine, each side with its own deadline: it carries an xhttp flow's
// download from the response body to the flow's Read, and its upload from
// the flow's Write to the request body or the next POST. A deadline that
// passes fails the waiting call with os.ErrDeadlineExceeded and nothing
// else: the pipe goes on.
type xhPipe struct {
	rwake chan struct{} // the reader may go on
	wwake chan struct{} // the writer may go on

	mu    sync.Mutex
	buf   []byte // unread bytes are buf[off:]
	off   int
	limit int   // the most unread bytes held
	rerr  error // what the reader gets once buf is empty (io.EOF: the end)
	werr  error // what the writer gets (the reader is gone)
	rdl   time.Time
	wdl   time.Time
}

func newXHPipe(limit int) *xhPipe {
	return &xhPipe{limit: limit, rwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1)}
}

// write appends all of p, waiting for room while the buffer is full.
func (p *xhPipe) write(b []byte) (int, error) {
	n := 0
	for {
		p.mu.Lock()
		if p.werr != nil {
			err := p.werr
			p.mu.Unlock()
			return n, err
		}
		if p.rerr != nil {
			p.mu.Unlock()
			return n, net.ErrClosed
		}
		if len(b) == 0 {
			p.mu.Unlock()
			return n, nil
		}
		if room := p.limit - (len(p.buf) - p.off); room > 0 {
			if p.off > 0 && p.off == len(p.buf) {
				p.buf, p.off = p.buf[:0], 0
			} else if p.off > 0 && len(p.buf)+min(room, len(b)) > cap(p.buf) {
				k := copy(p.buf, p.buf[p.off:])
				p.buf, p.off = p.buf[:k], 0
			}
			k := min(room, len(b))
			p.buf = append(p.buf, b[:k]...)
			b, n = b[k:], n+k
			p.mu.Unlock()
			signal(p.rwake)
			continue
		}
		dl := p.wdl
		p.mu.Unlock()
		if err := waitWake(p.wwake, dl); err != nil {
			return n, err
		}
	}
}

// read copies out what is buffered, waiting for something when nothing is.
func (p *xhPipe) read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		p.mu.Lock()
		if p.off < len(p.buf) {
			n := copy(b, p.buf[p.off:])
			p.off += n
			p.mu.Unlock()
			signal(p.wwake)
			return n, nil
		}
		if p.rerr != nil {
			err := p.rerr
			p.mu.Unlock()
			return 0, err
		}
		dl := p.rdl
		p.mu.Unlock()
		if err := waitWake(p.rwake, dl); err != nil {
			return 0, err
		}
	}
}

// ready waits until bytes are buffered or the write side ended; it
// returns the reader's error when nothing is buffered.
func (p *xhPipe) ready() error {
	for {
		p.mu.Lock()
		if p.off < len(p.buf) {
			p.mu.Unlock()
			return nil
		}
		if p.rerr != nil {
			err := p.rerr
			p.mu.Unlock()
			return err
		}
		p.mu.Unlock()
		<-p.rwake
	}
}

// take waits for buffered bytes and returns up to max of them, copied.
func (p *xhPipe) take(max int) ([]byte, error) {
	for {
		p.mu.Lock()
		if p.off < len(p.buf) {
			n := min(max, len(p.buf)-p.off)
			out := make([]byte, n)
			copy(out, p.buf[p.off:])
			p.off += n
			p.mu.Unlock()
			signal(p.wwake)
			return out, nil
		}
		if p.rerr != nil {
			err := p.rerr
			p.mu.Unlock()
			return nil, err
		}
		p.mu.Unlock()
		<-p.rwake
	}
}

// closeWrite ends what the reader gets: err once the buffer is read
// (io.EOF for the end). The first call wins.
func (p *xhPipe) closeWrite(err error) {
	p.mu.Lock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.mu.Unlock()
	signal(p.rwake)
}

// closeRead fails the writer with err and drops what is buffered; a
// reader after it reads err too.
func (p *xhPipe) closeRead(err error) {
	p.mu.Lock()
	if p.werr == nil {
		p.werr = err
	}
	if p.rerr == nil {
		p.rerr = err
	}
	p.buf, p.off = nil, 0
	p.mu.Unlock()
	signal(p.wwake)
	signal(p.rwake)
}

func (p *xhPipe) setReadDeadline(t time.Time) {
	p.mu.Lock()
	p.rdl = t
	p.mu.Unlock()
	signal(p.rwake)
}

func (p *xhPipe) setWriteDeadline(t time.Time) {
	p.mu.Lock()
	p.wdl = t
	p.mu.Unlock()
	signal(p.wwake)
}

// waitWake waits for a signal on wake or the deadline dl (none when zero).
func waitWake(wake chan struct{}, dl time.Time) error {
	if dl.IsZero() {
		<-wake
		return nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

// xhBodyReader is an upload pipe as a request body: it reads until the
// flow's CloseWrite (io.EOF) or the flow's end.
type xhBodyReader struct{ p *xhPipe }

func (r xhBodyReader) Read(b []byte) (int, error) { return r.p.read(b) }
func (r xhBodyReader) Close() error               { r.p.closeRead(io.ErrClosedPipe); return nil }
