package http

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/internal/clip"
	"switchyard/outbound"
	"switchyard/route/sniff"
	"switchyard/track"
)

const (
	// maxDiscard is the largest request body read and dropped to keep a
	// connection open after a refusal; a larger one closes it.
	maxDiscard = 256 << 10
	// maxHead bounds a request head, its request line included. A proxy
	// request needs a few KiB; browsers and servers refuse heads far
	// smaller than net/http's 1 MiB default, and every connection still in
	// its handshake may hold this much.
	maxHead = 64 << 10
	// lingerTimeout bounds the drain of a closing connection's input.
	lingerTimeout = 500 * time.Millisecond
)

// readBuf is the size of a connection's read buffer: a request line and
// ordinary headers fit; a longer line is gathered by the head parser, under
// maxHead. Small, as every connection waiting in its handshake holds one.
const readBuf = 2 << 10

// errHeadTooLarge ends a connection whose request head exceeds maxHead.
var errHeadTooLarge = errors.New("request head too large")

// session is one client connection.
type session struct {
	s   *Server
	c   net.Conn // the accepted conn, handed to the relay for tunnels
	src netip.AddrPort
	log *slog.Logger
	hs  *serve.Handshake // until a request is authorized; nil after

	cr *timed              // c's reads, under the deadline of the phase
	pr *serve.PrefixReader // the bytes given to ServeConn, then cr
	lr *headLimit          // pr, bounded while a head is read
	br *bufio.Reader       // requests are parsed from here
	bw *bufio.Writer       // responses are written here, then flushed; see writer
	up *upstream           // the origin connection kept for the next request
	us *track.Session      // the session of the user last authenticated; nil while anonymous
}

func (s *Server) handle(c net.Conn, first []byte, hs *serve.Handshake) {
	defer hs.Done()
	src := serve.AddrPort(c.RemoteAddr())
	ss := &session{s: s, c: c, src: src, log: s.log.With("source", src), hs: hs}
	ss.cr = &timed{Conn: c}
	ss.pr = &serve.PrefixReader{Head: first, R: ss.cr}
	ss.lr = &headLimit{r: ss.pr}
	ss.br = bufio.NewReaderSize(ss.lr, readBuf)
	defer ss.leave()
	defer ss.dropUpstream()
	ss.run()
}

// writer is where responses are written, made at the first one: a
// connection still sending its first head holds no write buffer.
func (ss *session) writer() *bufio.Writer {
	if ss.bw == nil {
		ss.bw = bufio.NewWriter(&timed{Conn: ss.c, idle: forwardIdle})
	}
	return ss.bw
}

// run serves requests until one ends the connection. Until a request is
// authorized, every head is read under the handshake's deadline; after,
// each waits keepAliveTimeout.
func (ss *session) run() {
	for {
		deadline := time.Now().Add(keepAliveTimeout)
		if ss.hs != nil {
			deadline = ss.hs.Deadline
		}
		ss.cr.idle = 0
		ss.c.SetReadDeadline(deadline)
		ss.lr.left = maxHead
		host := ss.peekHost()
		req, err := http.ReadRequest(ss.br)
		switch {
		case errors.Is(err, errHeadTooLarge):
			ss.log.Debug("http request refused", "error", clip.String(err.Error()))
			ss.respond(http.StatusRequestHeaderFieldsTooLarge, false)
			return
		case err != nil:
			if !quietEnd(err) {
				ss.log.Debug("http request refused", "error", clip.String(err.Error()))
				ss.respond(http.StatusBadRequest, false)
			}
			return
		}
		ss.lr.left = -1
		ss.cr.idle = forwardIdle
		user, ok, offered := ss.authorize(req)
		if !ok {
			// A request without credentials is how a browser learns that
			// it needs them: its connection is kept for the retry. Wrong
			// ones end it. A client waiting for 100 Continue sends no body
			// to drop.
			keep := !offered && !req.Close && !hasToken(req.Header, "Expect", "100-continue") && discardBody(req)
			ss.log.Debug("http proxy authentication failed", "method", clip.String(req.Method), "target", clip.String(req.RequestURI), "credentials", offered)
			ss.respond(http.StatusProxyAuthRequired, keep, "Proxy-Authenticate", `Basic realm="switchyard"`)
			if !keep {
				return
			}
			continue
		}
		ss.hs.Done()
		ss.hs = nil
		ss.enter(user)
		if req.Method == http.MethodConnect {
			ss.connect(req, user)
			return
		}
		if !req.URL.IsAbs() {
			ss.log.Debug("http request refused", "error", "not a proxy request", "target", clip.String(req.RequestURI))
			ss.respond(http.StatusBadRequest, false)
			return
		}
		if !ss.forward(req, user, host) {
			return
		}
	}
}

// peekHost returns the Host header of the request about to be read, when
// sniffing is on and its head is already buffered. http.ReadRequest drops
// the Host header of a request in absolute form, the only form forwarded.
func (ss *session) peekHost() string {
	if !ss.s.cfg.Sniff {
		return ""
	}
	if _, err := ss.br.Peek(1); err != nil {
		return ""
	}
	head, _ := ss.br.Peek(ss.br.Buffered())
	host, _ := sniff.HTTPHost(head)
	return host
}

// authorize checks Proxy-Authorization when users are configured and
// returns the user's name; offered reports whether the request carried
// credentials at all. Every offered credential counts with the guard: a
// source that keeps failing waits before its answer, right or wrong.
func (ss *session) authorize(req *http.Request) (user string, ok, offered bool) {
	users := ss.s.cfg.Users
	if len(users) == 0 {
		return "", true, false
	}
	header := req.Header.Get("Proxy-Authorization")
	if header == "" {
		return "", false, false
	}
	g := ss.s.guard
	var deadline time.Time
	if ss.hs != nil {
		deadline = ss.hs.Deadline
	}
	if !g.Wait(ss.s.conns.Context(), ss.src.Addr(), deadline) {
		return "", false, true
	}
	scheme, cred, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		g.Failed(ss.src, "", "http: Proxy-Authorization is not Basic")
		return "", false, true
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		g.Failed(ss.src, "", "http: Proxy-Authorization is not base64")
		return "", false, true
	}
	user, pass, found := strings.Cut(string(raw), ":")
	if !found || !serve.Authenticate(users, user, pass) {
		g.Failed(ss.src, user, "http: wrong username or password")
		return "", false, true
	}
	g.Succeeded(ss.src.Addr())
	return user, true, true
}

// respond writes a response with no body; unless keep, it says the
// connection closes.
func (ss *session) respond(code int, keep bool, header ...string) {
	if ss.s.conns.Context().Err() != nil {
		return // the server is closing: its connections end without a word
	}
	fmt.Fprintf(ss.writer(), "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(ss.writer(), "%s: %s\r\n", header[i], header[i+1])
	}
	if !keep {
		ss.writer().WriteString("Connection: close\r\n")
	}
	ss.writer().WriteString("Content-Length: 0\r\n\r\n")
	if ss.writer().Flush() == nil && !keep {
		ss.lingerClose()
	}
}

// lingerClose ends the connection after a final response without losing it:
// closing with unread input would reset the connection, and the client might
// drop the response. It closes the write side, then drains the input for a
// short while.
func (ss *session) lingerClose() {
	cw, ok := ss.c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	ss.c.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.Copy(io.Discard, io.LimitReader(ss.c, maxDiscard))
}

// respondDialError answers a failed dial: 403 for a refusal by rule, 504
// for a dial that ran out of time (its establishment deadline, or a connect
// timeout), 502 otherwise.
func (ss *session) respondDialError(err error) {
	code := http.StatusBadGateway
	var ne net.Error
	switch {
	case errors.Is(err, outbound.ErrBlocked):
		code = http.StatusForbidden
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		code = http.StatusGatewayTimeout
	}
	ss.respond(code, false)
}

// pending returns a copy of the bytes read from the client but not parsed.
func (ss *session) pending() []byte {
	n := ss.br.Buffered()
	if n == 0 && len(ss.pr.Head) == 0 {
		return nil
	}
	buffered, _ := ss.br.Peek(n)
	out := make([]byte, 0, n+len(ss.pr.Head))
	out = append(out, buffered...)
	return append(out, ss.pr.Head...)
}

// headLimit reads from r, at most left bytes while left is not negative.
type headLimit struct {
	r    io.Reader
	left int
}

func (h *headLimit) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, errHeadTooLarge
	}
	n, err := h.r.Read(b[:min(len(b), h.left)])
	h.left -= n
	return n, err
}

// discardBody reads and drops a request's body; false when it is too big
// or cannot be read, and the connection must close.
func discardBody(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	n, err := io.Copy(io.Discard, io.LimitReader(req.Body, maxDiscard+1))
	return err == nil && n <= maxDiscard
}

// quietEnd reports whether a failed read is the client going away or idle,
// which needs no answer.
func quietEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET)
}
