package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

const (
	// xhDownBuffer and xhUpBuffer bound what a flow holds of its download
	// not yet read and of its streamed upload not yet sent.
	xhDownBuffer = 64 << 10
	xhUpBuffer   = 64 << 10
	// xhPostsInFlight bounds the packet-up POSTs of a flow outstanding at
	// once over HTTP/2, well under the 30 that Xray's server buffers out
	// of order (scMaxBufferedPosts) before it gives up on the session.
	xhPostsInFlight = 4
)

var errXHClosed = errors.New("xhttp: the flow is closed")

// xhConn is one flow over XHTTP. Read returns the download's response
// body; Write sends the upload: into the streamed request body (stream-one,
// stream-up) or into the next POST (packet-up). One goroutine pumps the
// download into a pipe so that reads keep their deadlines; the uploads run
// on goroutines of the flow's own. Close ends every request of the flow and
// waits for its goroutines.
type xhConn struct {
	// x, cc and requests are the upload's client, connection and count
	// (as dl's without download settings); cc is nil when the uploads
	// open connections of their own (HTTP/1.1).
	x        *xhttpClient
	cc       xhCC
	requests *atomic.Int64
	// ul and dl are the flow's holds: the upload's and the download's,
	// the same one without download settings.
	ul, dl  xhHold
	split   bool // dl is another client's
	maxPost int  // packet-up: the most a POST carries, drawn for the flow
	session string
	ctx     context.Context // the flow's requests run under it
	cancel  context.CancelFunc
	down    *xhPipe
	up      *xhPipe
	wg      sync.WaitGroup

	// refused: the flow could not open, or the server refused its
	// download or left it unanswered (after an early dial), so that the
	// download's connection takes no more flows.
	refused   atomic.Bool
	closeOnce sync.Once
	// upload (packet-up over HTTP/1.1): the flow's upload connection,
	// the uploader goroutine's alone.
	upload *http.ClientConn
}

// openXHConn sends the flow's first requests: the download's on dl, the
// upload's on ul (the same hold without download settings). It returns
// once the download's response headers arrived, under ctx; or, when the
// server answered a flow on dl's connection before (HTTP/2), once the
// download's request is written, as Xray's client does: the upload goes
// out without waiting a round trip, and the download waits for its answer
// until ctx's deadline.
func openXHConn(ctx context.Context, ul, dl xhHold) (*xhConn, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cfg := ul.x.cfg
	upLimit := xhUpBuffer
	if cfg.mode == "packet-up" {
		upLimit = drawInt(cfg.maxPost)
	}
	c := &xhConn{x: ul.x, cc: ul.cc, requests: ul.requests, ul: ul, dl: dl, split: ul.x != dl.x,
		ctx: fctx, cancel: cancel, down: newXHPipe(xhDownBuffer), up: newXHPipe(upLimit), maxPost: upLimit}
	fail := func(err error) (*xhConn, error) {
		c.refused.Store(true)
		c.Close()
		return nil, err
	}
	early := dl.answered != nil && dl.answered.Load()
	if cfg.mode == "stream-one" {
		req := cfg.request(fctx, http.MethodPost, "")
		cfg.grpcHeader(req)
		req.Body = xhBodyReader{c.up}
		if err := c.openDownload(ctx, req, early); err != nil {
			return fail(err)
		}
		return c, nil
	}
	c.session = newSessionID()
	if err := c.openDownload(ctx, dl.x.cfg.request(fctx, http.MethodGet, c.session), early); err != nil {
		return fail(err)
	}
	if cfg.mode == "stream-up" {
		req := cfg.request(fctx, http.MethodPost, c.session)
		cfg.grpcHeader(req)
		req.Body = xhBodyReader{c.up}
		c.wg.Add(1)
		go c.streamUp(req)
		return c, nil
	}
	c.wg.Add(1)
	go c.packetUp()
	return c, nil
}

// openDownload sends req, the request whose response body is the download,
// and pumps that body into the download pipe. Unless early is set it waits
// for the response headers under ctx, so that a refusing or silent server
// fails the dial. Early, it returns once the request is written (or
// failed): the answer is awaited by the pump, bounded by ctx's deadline,
// and a refusal fails the flow's reads and writes. A 200 marks answered.
func (c *xhConn) openDownload(ctx context.Context, req *http.Request, early bool) error {
	answered := c.dl.answered
	if !early {
		resp, err := c.roundTrip(ctx, req)
		if err != nil {
			return err
		}
		if answered != nil {
			answered.Store(true)
		}
		c.pump(resp.Body)
		return nil
	}
	wrote := make(chan struct{})
	var once sync.Once
	written := func() { once.Do(func() { close(wrote) }) }
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{WroteHeaders: written}))
	failed := make(chan error, 1)
	var late *time.Timer
	var silent atomic.Bool
	if deadline, ok := ctx.Deadline(); ok {
		late = time.AfterFunc(time.Until(deadline), func() {
			silent.Store(true)
			c.cancel()
		})
	}
	c.dl.count()
	server := c.dl.x.d.server
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		resp, err := c.dl.cc.RoundTrip(req)
		if late != nil && !late.Stop() && err == nil {
			resp.Body.Close()
			err = context.Canceled // the deadline went first
		}
		switch {
		case silent.Load():
			err = fmt.Errorf("xhttp: no answer from %s to %s %s within the establishment deadline", server, req.Method, req.URL.Path)
		case err != nil:
			err = fmt.Errorf("xhttp: %s %s at %s: %w", req.Method, req.URL.Path, server, err)
		default:
			if err = checkXHResponse(resp); err != nil {
				resp.Body.Close()
				err = fmt.Errorf("xhttp: %s %s at %s: %w", req.Method, req.URL.Path, server, err)
			}
		}
		if err != nil {
			failed <- err
			written()
			if c.ctx.Err() == nil || silent.Load() {
				c.refused.Store(true)
				c.down.closeWrite(err)
				c.up.closeRead(err)
			}
			return
		}
		answered.Store(true)
		c.copyDown(resp.Body)
	}()
	select {
	case <-wrote:
	case <-ctx.Done():
		return fmt.Errorf("xhttp: no answer from %s to %s %s: %w", server, req.Method, req.URL.Path, context.Cause(ctx))
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

// roundTrip sends req on cc and waits for its response headers under ctx;
// anything but 200 fails.
func (c *xhConn) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	type result struct {
		resp *http.Response
		err  error
	}
	ch := make(chan result, 1)
	c.dl.count()
	server := c.dl.x.d.server
	go func() {
		resp, err := c.dl.cc.RoundTrip(req)
		ch <- result{resp, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		c.cancel()
		r = <-ch
		if r.resp != nil {
			r.resp.Body.Close()
		}
		return nil, fmt.Errorf("xhttp: no answer from %s to %s %s: %w", server, req.Method, req.URL.Path, context.Cause(ctx))
	}
	if r.err != nil {
		return nil, fmt.Errorf("xhttp: %s %s at %s: %w", req.Method, req.URL.Path, server, r.err)
	}
	if err := checkXHResponse(r.resp); err != nil {
		r.resp.Body.Close()
		return nil, fmt.Errorf("xhttp: %s %s at %s: %w", req.Method, req.URL.Path, server, err)
	}
	return r.resp, nil
}

// checkXHResponse accepts the server's answer to a request of the flow:
// 200, as Xray's server answers every request it takes.
func checkXHResponse(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the server answered %q", resp.Status)
	}
	return nil
}

// pump copies the download's body into the download pipe until it ends,
// on a goroutine of the flow's.
func (c *xhConn) pump(body io.ReadCloser) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.copyDown(body)
	}()
}

// xhPumpBufs are the pumps' read buffers: a flow's pump holds one while
// the download lasts.
var xhPumpBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyDown copies the download's body into the download pipe until it
// ends, and closes body.
func (c *xhConn) copyDown(body io.ReadCloser) {
	defer body.Close()
	bp := xhPumpBufs.Get().(*[]byte)
	defer xhPumpBufs.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := c.down.write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("xhttp: the download from %s broke: %w", c.dl.x.d.server, err)
			}
			c.down.closeWrite(err)
			return
		}
	}
}

// streamUp runs the streamed upload POST of stream-up: its answer is read
// and dropped (Xray's server may pad it) until the upload ends.
func (c *xhConn) streamUp(req *http.Request) {
	defer c.wg.Done()
	c.count()
	resp, err := c.cc.RoundTrip(req)
	if err == nil {
		err = checkXHResponse(resp)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil && c.ctx.Err() == nil {
		c.up.closeRead(fmt.Errorf("xhttp: the upload to %s failed: %w", c.x.d.server, err))
	}
}

// packetUp cuts the upload into POSTs: each takes what was written since
// the last, up to the flow's maxPost bytes, at least an interval drawn
// from minInterval after the last one started, numbered from 0. Over HTTP/2 up to xhPostsInFlight run at once;
// over HTTP/1.1 they go one after the other on the flow's upload
// connection.
//
// The second POST does not wait the interval: a proxy's dial writes its
// request header alone, so the first POST carries that header and the
// second the flow's first bytes, which would otherwise reach the server
// an interval late on every flow (Xray's client sends its header with the
// first bytes in one POST). The interval applies from there on.
func (c *xhConn) packetUp() {
	defer c.wg.Done()
	cfg := c.x.cfg
	inflight := make(chan struct{}, xhPostsInFlight)
	var (
		seq  uint64
		last time.Time
		pw   sync.WaitGroup
	)
	defer pw.Wait()
	defer func() {
		if c.upload != nil {
			c.upload.Close()
		}
	}()
	for {
		// Wait for something to send, then for the interval, and only then
		// take what piled up meanwhile: one POST carries it all.
		if err := c.up.ready(); err != nil {
			return
		}
		if wait := drawInt(cfg.minInterval) - time.Since(last); seq > 1 && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				return
			}
		}
		b, err := c.up.take(c.maxPost)
		if err != nil {
			return
		}
		last = time.Now()
		sub := c.session + "/" + strconv.FormatUint(seq, 10)
		seq++
		if cfg.h1 {
			if err := c.postH1(sub, b); err != nil {
				c.failUpload(err)
				return
			}
			continue
		}
		select {
		case inflight <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		// The next POST starts once this one's body is written, as Xray's
		// client does: the bodies of one flow never compete for the
		// connection's flow-control window, only their answers overlap.
		written := make(chan struct{})
		pw.Add(1)
		go func() {
			defer pw.Done()
			defer func() { <-inflight }()
			if err := c.post(c.cc, sub, b, written); err != nil {
				c.failUpload(err)
			}
		}()
		select {
		case <-written:
		case <-c.ctx.Done():
			return
		}
	}
}

// xhPostBody is a POST's body that closes written once it was read to the
// end, or when the request is done with it.
type xhPostBody struct {
	r       *bytes.Reader
	written chan struct{}
	once    *sync.Once
}

func (b xhPostBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.once.Do(func() { close(b.written) })
	}
	return n, err
}

func (b xhPostBody) Close() error {
	b.once.Do(func() { close(b.written) })
	return nil
}

// failUpload ends the flow's upload and download with err, unless the flow
// is closing anyway.
func (c *xhConn) failUpload(err error) {
	if c.ctx.Err() != nil {
		return
	}
	err = fmt.Errorf("xhttp: an upload to %s failed: %w", c.x.d.server, err)
	c.up.closeRead(err)
	c.down.closeRead(err)
}

// post sends one packet-up POST on cc and reads its answer; written, when
// not nil, is closed once the body is sent (or the request ended).
func (c *xhConn) post(cc xhCC, sub string, b []byte, written chan struct{}) error {
	req := c.x.cfg.request(c.ctx, http.MethodPost, sub)
	if written == nil {
		written = make(chan struct{})
	}
	once := new(sync.Once)
	req.Body = xhPostBody{r: bytes.NewReader(b), written: written, once: once}
	req.ContentLength = int64(len(b))
	if cc == c.cc {
		c.count()
	}
	resp, err := cc.RoundTrip(req)
	once.Do(func() { close(written) })
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return checkXHResponse(resp)
}

// postH1 sends one POST over HTTP/1.1 on the flow's upload connection,
// opening it (again) when there is none or the server closed it; a POST
// that fails on a kept-alive connection is sent once more on a fresh one.
func (c *xhConn) postH1(sub string, b []byte) error {
	for try := 0; ; try++ {
		fresh := false
		if c.upload == nil || c.upload.Err() != nil {
			if c.upload != nil {
				c.upload.Close()
			}
			ctx, cancel := context.WithTimeout(c.ctx, c.x.establish)
			cc, _, err := c.x.newConn(ctx)
			cancel()
			if err != nil {
				return err
			}
			c.upload, fresh = cc, true
		}
		err := c.post(c.upload, sub, b, nil)
		if err == nil || fresh || try > 0 || c.ctx.Err() != nil {
			return err
		}
		c.upload.Close()
		c.upload = nil
	}
}

// count counts one request on the flow's upload connection.
func (c *xhConn) count() { c.ul.count() }

// Commit (netx.Committer) lets the connections a speculative dial's flow
// brought up serve the flows after it; uncommitted, they close with the
// flow.
func (c *xhConn) Commit(context.Context) {
	if c.dl.adopt != nil {
		c.dl.adopt()
	}
	if c.split && c.ul.adopt != nil {
		c.ul.adopt()
	}
}

func (c *xhConn) Read(p []byte) (int, error)  { return c.down.read(p) }
func (c *xhConn) Write(p []byte) (int, error) { return c.up.write(p) }

// CloseWrite ends the upload once what was written is sent: the streamed
// request body ends, or no POST follows. packet-up has no request that
// tells the server the upload ended, so there CloseWrite returns
// netx.ErrEndUnsignalled: the server keeps the download open, and the
// relay waits for it only briefly.
func (c *xhConn) CloseWrite() error {
	c.up.closeWrite(io.EOF)
	if c.x.cfg.mode == "packet-up" {
		return netx.ErrEndUnsignalled
	}
	return nil
}

// Close ends every request of the flow, waits for its goroutines and gives
// back its hold on the connection.
func (c *xhConn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.down.closeRead(errXHClosed)
		c.up.closeRead(errXHClosed)
		c.wg.Wait()
		c.dl.release(!c.refused.Load())
		if c.split {
			c.ul.release(true)
		}
	})
	return nil
}

func (c *xhConn) LocalAddr() net.Addr {
	if c.dl.raw == nil {
		return &net.TCPAddr{}
	}
	return c.dl.raw.LocalAddr()
}

func (c *xhConn) RemoteAddr() net.Addr {
	if c.dl.raw == nil {
		return &net.TCPAddr{}
	}
	return c.dl.raw.RemoteAddr()
}

func (c *xhConn) SetDeadline(t time.Time) error {
	c.down.setReadDeadline(t)
	c.up.setWriteDeadline(t)
	return nil
}

func (c *xhConn) SetReadDeadline(t time.Time) error {
	c.down.setReadDeadline(t)
	return nil
}

func (c *xhConn) SetWriteDeadline(t time.Time) error {
	c.up.setWriteDeadline(t)
	return nil
}
