package http

import (
	"context"
	"net"
	"net/http"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/internal/clip"
	"switchyard/netx"
	"switchyard/relay"
)

// established is the answer to a CONNECT whose tunnel is open.
const established = "HTTP/1.1 200 Connection established\r\n\r\n"

// connect opens a CONNECT tunnel and relays it until either side ends.
func (ss *session) connect(req *http.Request, user string) {
	dst, err := netx.ParseAddr(req.URL.Host)
	if err != nil {
		ss.log.Debug("http connect refused", "error", clip.String(err.Error()))
		ss.respond(http.StatusBadRequest, false)
		return
	}
	flow := netx.Flow{Network: netx.TCP, Dst: dst, Src: ss.src, Inbound: ss.s.cfg.Tag, User: user, Session: ss.us.ID()}
	pending := ss.pending()
	ss.c.SetDeadline(time.Time{})
	var up net.Conn
	if ss.s.cfg.Sniff {
		up = ss.connectSniffed(flow, pending)
	} else {
		up = ss.connectPlain(flow, pending)
	}
	if up != nil {
		relay.Pipe(ss.s.conns.Context(), ss.c, up, 0)
	}
}

// connectPlain dials first, then answers the CONNECT with the outcome.
func (ss *session) connectPlain(flow netx.Flow, pending []byte) net.Conn {
	up, err := ss.dial(flow)
	if err != nil {
		ss.log.Debug("http connect failed", "destination", flow.Dst, "error", err)
		ss.respondDialError(err)
		return nil
	}
	if !ss.writeEstablished() || !writeAll(up, pending) {
		up.Close()
		return nil
	}
	return up
}

// connectSniffed answers the CONNECT at once, sniffs the client's first
// bytes, and only then routes the flow; a failed dial can only close.
func (ss *session) connectSniffed(flow netx.Flow, pending []byte) net.Conn {
	if !ss.writeEstablished() {
		return nil
	}
	first, err := serve.ReadFirst(ss.c, pending, serve.SniffWait)
	if err != nil {
		return nil
	}
	defer first.Release()
	flow.Protocol, flow.Sniffed = first.Protocol, first.Domain
	up, err := ss.dial(flow)
	if err != nil {
		ss.log.Debug("http connect failed", "destination", flow.Dst, "sniffed", flow.Sniffed, "error", err)
		return nil
	}
	if !writeAll(up, first.Bytes()) {
		up.Close()
		return nil
	}
	return up
}

// dial opens the flow; it is abandoned as soon as the client hangs up.
func (ss *session) dial(flow netx.Flow) (net.Conn, error) {
	return serve.WhileConnected(ss.s.conns.Context(), ss.c, func(ctx context.Context) (net.Conn, error) {
		return ss.s.conn.ConnectStream(ctx, flow)
	})
}

func (ss *session) writeEstablished() bool {
	ss.c.SetWriteDeadline(time.Now().Add(replyTimeout))
	_, err := ss.c.Write([]byte(established))
	ss.c.SetWriteDeadline(time.Time{})
	return err == nil
}

// writeAll writes b, when there is any, to up.
func writeAll(up net.Conn, b []byte) bool {
	if len(b) == 0 {
		return true
	}
	_, err := up.Write(b)
	return err == nil
}
