package http

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"switchyard/internal/clip"
	"switchyard/netx"
)

// upstream is an origin connection kept between requests on one client
// connection.
type upstream struct {
	key  upstreamKey
	conn net.Conn
	w    *timed
	br   *bufio.Reader
	used bool // has carried an exchange; the origin may have closed it since
	// unwatch stops the close of conn on Server.Close.
	unwatch func() bool
}

// upstreamKey is what a kept origin connection may be reused for: the same
// flow but for its source.
type upstreamKey struct {
	dst           netx.Addr
	sniffed, user string
}

// errUpgrade ends an exchange whose origin switched protocols although the
// Upgrade header was not passed on.
var errUpgrade = errors.New("the origin switched protocols")

// forward sends a request in absolute form to its origin and the response
// back. It reports whether the client connection may serve another request.
func (ss *session) forward(req *http.Request, user, host string) bool {
	if !strings.EqualFold(req.URL.Scheme, "http") || req.URL.Host == "" {
		ss.log.Debug("http request refused", "error", "only http:// targets are forwarded", "target", clip.String(req.RequestURI))
		ss.respond(http.StatusBadRequest, false)
		return false
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	dst, err := netx.ParseAddr(net.JoinHostPort(req.URL.Hostname(), port))
	if err != nil {
		ss.log.Debug("http request refused", "error", clip.String(err.Error()))
		ss.respond(http.StatusBadRequest, false)
		return false
	}
	flow := netx.Flow{
		Network: netx.TCP, Dst: dst, Src: ss.src, Inbound: ss.s.cfg.Tag, User: user,
		Session: ss.us.ID(), Sniffed: host, Protocol: "http",
	}
	expectContinue := prepareRequest(req)

	for attempt := 0; ; attempt++ {
		up, err := ss.upstreamFor(flow)
		if err != nil {
			ss.log.Debug("http request failed", "destination", flow.Dst, "error", err)
			ss.respondDialError(err)
			return false
		}
		if expectContinue {
			ss.writer().WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if ss.writer().Flush() != nil {
				return false
			}
			expectContinue = false
		}
		resp, interim, err := ss.exchange(up, req)
		if err != nil {
			ss.dropUpstream()
			// A kept connection the origin closed while idle fails the
			// first exchange on it; a request without a body is sent again.
			if up.used && attempt == 0 && !interim && (req.Body == nil || req.Body == http.NoBody) {
				continue
			}
			ss.log.Debug("http request failed", "destination", flow.Dst, "error", err)
			if !interim {
				ss.respond(http.StatusBadGateway, false)
			}
			return false
		}
		up.used = true
		return ss.writeResponse(req, resp)
	}
}

// prepareRequest turns a proxy request into the request for its origin:
// origin form, no hop-by-hop headers, no User-Agent the client did not send.
// It reports whether the client waits for 100 Continue, which the proxy
// answers itself.
func prepareRequest(req *http.Request) (expectContinue bool) {
	removeHopByHop(req.Header)
	if hasToken(req.Header, "Expect", "100-continue") {
		req.Header.Del("Expect")
		expectContinue = true
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Request.Write adds its own otherwise
	}
	req.RequestURI = ""
	return expectContinue
}

// exchange writes req to the origin and reads its final response, passing
// interim (1xx) responses to the client; interim reports whether one was.
func (ss *session) exchange(up *upstream, req *http.Request) (resp *http.Response, interim bool, err error) {
	if err := req.Write(up.w); err != nil {
		return nil, false, err
	}
	for {
		resp, err := http.ReadResponse(up.br, req)
		if err != nil {
			return nil, interim, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, interim, errUpgrade
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			interim = true
			removeHopByHop(resp.Header)
			ss.writer().WriteString("HTTP/1.1 " + resp.Status + "\r\n")
			resp.Header.Write(ss.writer())
			ss.writer().WriteString("\r\n")
			if err := ss.writer().Flush(); err != nil {
				return nil, interim, err
			}
		default:
			return resp, interim, nil
		}
	}
}

// writeResponse passes the origin's response to the client and reports
// whether both connections may carry another request.
func (ss *session) writeResponse(req *http.Request, resp *http.Response) bool {
	defer resp.Body.Close()
	removeHopByHop(resp.Header)
	if !req.ProtoAtLeast(1, 1) {
		// An HTTP/1.0 client reads no chunks: the body runs to the close.
		resp.TransferEncoding = nil
		resp.Close = true
	}
	if req.Close {
		resp.Close = true
	}
	if err := resp.Write(ss.writer()); err != nil {
		ss.log.Debug("http response failed", "destination", ss.up.key.dst, "error", err)
		return false
	}
	if err := ss.writer().Flush(); err != nil {
		return false
	}
	if resp.Close {
		return false
	}
	if ss.up.br.Buffered() > 0 {
		// The origin sent more than its response: do not reuse it.
		ss.dropUpstream()
	}
	return true
}

// upstreamFor returns the kept origin connection when it serves flow, or
// dials a new one.
func (ss *session) upstreamFor(flow netx.Flow) (*upstream, error) {
	key := upstreamKey{dst: flow.Dst, sniffed: flow.Sniffed, user: flow.User}
	if ss.up != nil && ss.up.key == key {
		return ss.up, nil
	}
	ss.dropUpstream()
	conn, err := ss.dial(flow)
	if err != nil {
		return nil, err
	}
	w := &timed{Conn: conn, idle: forwardIdle}
	ss.up = &upstream{key: key, conn: conn, w: w, br: bufio.NewReader(w)}
	// Server.Close closes the client connection; this closes the origin's,
	// which an exchange may be waiting on.
	ss.up.unwatch = context.AfterFunc(ss.s.conns.Context(), func() { conn.Close() })
	return ss.up, nil
}

func (ss *session) dropUpstream() {
	if ss.up != nil {
		ss.up.unwatch()
		ss.up.conn.Close()
		ss.up = nil
	}
}
