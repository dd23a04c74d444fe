package vless

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	codec "switchyard/protocol/vless"
	"switchyard/transport"
)

// visionRead holds one TLS record's plaintext (16 KiB at most): each read
// of the TLS stream takes a whole record, so that nothing of the record
// that announces Direct stays inside the TLS layer.
const visionRead = 16<<10 + 1024

// visionConn is a VLESS stream with the Vision flow over a TLS stream
// (transport.TLSStream). Both directions start padded (protocol/vless
// vision.go); once the inner traffic is TLS 1.3 and carries application
// data, each direction steps down to the TCP conn under the outer TLS,
// where the inner records pass unchanged: a relay then splices them.
type visionConn struct {
	s   *transport.TLSStream
	tcp *net.TCPConn
	id  codec.UUID

	mu     sync.Mutex // the filter, which both directions feed
	filter *codec.Filter

	// Writer side (one writer at a time).
	padding  bool        // blocks still wrap what is written
	toDirect bool        // the block being written says Direct
	wDirect  atomic.Bool // the Direct block went out: writes go to tcp
	wbuf     []byte
	cuts     [][]byte
	records  codec.RecordTracker

	// Reader side (one reader at a time).
	hdr     [2 + 255]byte
	have    int
	hdrDone bool
	bad     error
	unpad   *codec.Unpadder
	rbuf    []byte
	out     []byte // content read and not yet returned
	outBuf  []byte
	plain   bool        // the padding ended with End: TLS reads pass unchanged
	rDirect bool        // the padding ended with Direct: reads come from tcp
	raw     []byte      // bytes read from tcp past the TLS layer, first
	rThru   atomic.Bool // reads come from tcp, nothing left before
	rDown   atomic.Bool // rDirect, for Close
}

var (
	_ netx.Passthrough = (*visionConn)(nil)
	_ netx.Carrier     = (*visionConn)(nil)
)

// errVisionTLS is the error of a Vision flow over an outer TLS older than
// 1.3, which Xray's client refuses too.
var errVisionTLS = errors.New("vless: the vision flow needs TLS 1.3 to the server")

// openVision dials the server, checks that the outer TLS is 1.3 and sends
// the request header with the flow in its addons and a first, padding-only
// block (the header's camouflage, as Xray's client sends when the flow has
// no bytes yet).
func (o *Outbound) openVision(ctx context.Context, cmd byte, to netx.Addr) (*visionConn, error) {
	req, err := codec.AppendRequestFlow(make([]byte, 0, codec.RequestHeaderMax+20+codec.BlockMax), &o.id, codec.FlowVision, cmd, to)
	if err != nil {
		return nil, err
	}
	req = codec.AppendBlock(req, &o.id, nil, codec.CommandContinue, true)
	c, err := o.transport.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("vless: %w", err)
	}
	s, ok := c.(*transport.TLSStream)
	if !ok {
		c.Close()
		return nil, errors.New("vless: the vision flow needs a TLS stream to the server")
	}
	if s.TLSVersion() != tls.VersionTLS13 {
		c.Close()
		return nil, errVisionTLS
	}
	v := &visionConn{s: s, tcp: s.TCP(), id: o.id, filter: codec.NewFilter(), padding: true, unpad: codec.NewUnpadder(o.id)}
	netx.Mark(ctx, netx.PhaseHandshake)
	if err := netx.Within(ctx, s, func() error { _, err := s.Write(req); return err }); err != nil {
		c.Close()
		return nil, fmt.Errorf("vless: %w", err)
	}
	return v, nil
}

// Through is the TCP conn once the direction stepped down, nil before.
func (c *visionConn) Through(read bool) net.Conn {
	if read && c.rThru.Load() || !read && c.wDirect.Load() {
		return c.tcp
	}
	return nil
}

// Carrier is the TLS stream under the Vision framing.
func (c *visionConn) Carrier() net.Conn { return c.s }

func (c *visionConn) Write(p []byte) (int, error) {
	if c.wDirect.Load() {
		return c.tcp.Write(p)
	}
	c.mu.Lock()
	c.filter.Look(p)
	isTLS, tls12, direct, left := c.filter.TLS, c.filter.TLS12, c.filter.Direct, c.filter.Left()
	c.mu.Unlock()
	if !c.padding {
		return c.s.Write(p)
	}
	complete := codec.CompleteRecords(p)
	cut := c.records.Feed(p)
	if isTLS && direct && !complete && cut > 0 {
		return c.stepDown(p, cut)
	}
	c.cuts = codec.SplitContent(p, c.cuts[:0])
	defer clear(c.cuts)
	long := isTLS
	end := codec.CommandEnd
	if direct {
		end = codec.CommandDirect
	}
	for i, b := range c.cuts {
		last := i == len(c.cuts)-1
		if isTLS && len(b) >= 6 && b[0] == 0x17 && b[1] == 0x03 && b[2] == 0x03 && complete {
			cmd := codec.CommandContinue
			if last {
				cmd = end
			}
			if direct {
				c.toDirect = true
			}
			if err := c.block(b, cmd, true); err != nil {
				return 0, err
			}
			c.padding, long = false, false
			continue
		}
		if !tls12 && left <= 1 {
			// Not TLS, or too late to tell: the padding ends here, and
			// the rest passes unchanged.
			c.padding = false
			if err := c.block(b, codec.CommandEnd, long); err != nil {
				return 0, err
			}
			if rest := p[len(p)-restLen(c.cuts[i+1:]):]; len(rest) > 0 {
				if _, err := c.s.Write(rest); err != nil {
					return 0, err
				}
			}
			break
		}
		cmd := codec.CommandContinue
		if last && !c.padding {
			cmd = end
		}
		if err := c.block(b, cmd, long); err != nil {
			return 0, err
		}
	}
	if c.toDirect {
		c.wDirect.Store(true)
	}
	return len(p), nil
}

// block writes one block on the TLS stream by itself: one record.
func (c *visionConn) block(content []byte, cmd byte, long bool) error {
	c.wbuf = codec.AppendBlock(c.wbuf[:0], nil, content, cmd, long)
	_, err := c.s.Write(c.wbuf)
	return err
}

// restLen is the length of the pieces left.
func restLen(cuts [][]byte) int {
	n := 0
	for _, b := range cuts {
		n += len(b)
	}
	return n
}

// stepDown writes p[:cut], which ends the inner client's application data
// record, in blocks, the last saying Direct, and the rest of p on the TCP
// conn.
func (c *visionConn) stepDown(p []byte, cut int) (int, error) {
	c.cuts = codec.SplitContent(p[:cut], c.cuts[:0])
	defer clear(c.cuts)
	c.padding = false
	for i, b := range c.cuts {
		cmd := codec.CommandContinue
		if i == len(c.cuts)-1 {
			cmd = codec.CommandDirect
		}
		if err := c.block(b, cmd, true); err != nil {
			return 0, err
		}
	}
	c.wDirect.Store(true)
	if cut == len(p) {
		return len(p), nil
	}
	n, err := c.tcp.Write(p[cut:])
	return cut + n, err
}

func (c *visionConn) Read(p []byte) (int, error) {
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			c.drained()
			if len(c.out) == 0 {
				n += c.received(p[n:])
			}
			return n, nil
		}
		if c.rDirect {
			if len(c.raw) > 0 {
				n := copy(p, c.raw)
				c.raw = c.raw[n:]
				c.drained()
				return n, nil
			}
			c.rThru.Store(true)
			return c.tcp.Read(p)
		}
		if c.plain {
			return c.s.Read(p)
		}
		if c.bad != nil {
			return 0, c.bad
		}
		if err := c.record(); err != nil {
			return 0, err
		}
	}
}

// received decodes into p the padded records already received, without
// waiting, while p has room and the padding lasts: a relay then writes
// many records' content at once (a server that never sees the inner TLS's
// records end at a read's end pads a bulk download to its end). What does
// not fit waits in c.out. It returns how much it put in p; an error waits
// for the next Read.
func (c *visionConn) received(p []byte) int {
	n := 0
	for len(p)-n >= minReceived && c.hdrDone && !c.plain && !c.rDirect && c.bad == nil {
		m := c.s.ReadReceived(c.rbuf)
		if m == 0 {
			break
		}
		data := c.rbuf[:m]
		// The content and what follows the padding are at most m bytes:
		// they go into p when it has room for m.
		spill := m > len(p)-n
		dst := p[n:n]
		if spill {
			dst = c.outBuf[:0]
		}
		out, err := c.unpadded(dst, data)
		if err != nil {
			break
		}
		if spill {
			k := copy(p[n:], out)
			n += k
			c.outBuf = out[:0]
			c.out = out[k:]
			break
		}
		n += len(out)
	}
	return n
}

// minReceived is the room a read must have left to take a record already
// received.
const minReceived = 4 << 10

// ended steps the reads down after the padding ended with cmd: to the TCP
// conn on Direct, else to the TLS stream unchanged.
func (c *visionConn) ended(cmd byte) {
	if cmd == codec.CommandDirect {
		_, c.raw = c.s.Beneath()
		c.rDirect = true
		c.rDown.Store(true)
		return
	}
	c.plain = true
	c.s.StayOnTLS()
}

// drained lets a relay read the TCP conn itself once the reads stepped
// down and nothing read before is left.
func (c *visionConn) drained() {
	if c.rDirect && len(c.out) == 0 && len(c.raw) == 0 {
		c.rThru.Store(true)
	}
}

// record reads one TLS record's plaintext and decodes it: the response
// header first, then the blocks, until one ends the padding.
func (c *visionConn) record() error {
	if c.rbuf == nil {
		c.rbuf = make([]byte, visionRead)
	}
	n, err := c.s.Read(c.rbuf)
	data := c.rbuf[:n]
	if n == 0 {
		switch {
		case err == io.EOF && !c.hdrDone:
			c.bad = proxyconn.ErrHandshakeClosed
			return c.bad
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			c.bad = err
		}
		return err
	}
	if !c.hdrDone {
		for !c.hdrDone && len(data) > 0 {
			want, herr := codec.ResponseLen(c.hdr[:c.have])
			if herr != nil {
				c.bad = herr
				return herr
			}
			if want <= c.have {
				c.hdrDone = true
				break
			}
			m := copy(c.hdr[c.have:want], data)
			c.have += m
			data = data[m:]
		}
		if !c.hdrDone {
			if want, _ := codec.ResponseLen(c.hdr[:c.have]); want <= c.have {
				c.hdrDone = true
			}
		}
		if len(data) == 0 {
			return nil
		}
	}
	out, err := c.unpadded(c.outBuf[:0], data)
	if err != nil {
		return err
	}
	c.outBuf = out[:0]
	c.out = out
	return nil
}

// unpadded appends to dst the content of one record's plaintext data,
// and, once a block ends the padding, the bytes after it, stepping the
// reads down; a block that does not parse fails the reads for good.
func (c *visionConn) unpadded(dst, data []byte) ([]byte, error) {
	out, took, err := c.unpad.Feed(dst, data)
	if err != nil {
		c.bad = err
		return nil, err
	}
	c.mu.Lock()
	c.filter.Look(out)
	c.mu.Unlock()
	if ended, cmd := c.unpad.Ended(); ended {
		out = append(out, data[took:]...)
		c.ended(cmd)
	}
	return out, nil
}

// CloseWrite ends the flow's bytes toward the server: on the TCP conn once
// writes stepped down, else on the TLS stream.
func (c *visionConn) CloseWrite() error {
	if c.wDirect.Load() {
		return c.tcp.CloseWrite()
	}
	if cw, ok := c.s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("vless: the transport cannot half-close")
}

// Close closes the TCP conn itself once a direction stepped down: a TLS
// alert would land among the inner records.
func (c *visionConn) Close() error {
	if c.wDirect.Load() || c.rDown.Load() {
		return c.tcp.Close()
	}
	return c.s.Close()
}

func (c *visionConn) LocalAddr() net.Addr  { return c.s.LocalAddr() }
func (c *visionConn) RemoteAddr() net.Addr { return c.s.RemoteAddr() }

func (c *visionConn) SetDeadline(t time.Time) error      { return c.tcp.SetDeadline(t) }
func (c *visionConn) SetReadDeadline(t time.Time) error  { return c.tcp.SetReadDeadline(t) }
func (c *visionConn) SetWriteDeadline(t time.Time) error { return c.tcp.SetWriteDeadline(t) }
