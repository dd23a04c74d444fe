package socks

import (
	"context"
	"log/slog"
	"net"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/netx"
	"switchyard/protocol/socks5"
	"switchyard/relay"
)

// A replier answers a CONNECT in the protocol of its request (SOCKS5 or
// SOCKS4): a nil dialErr grants it, bound being the upstream's local address
// (or none); otherwise it refuses it for dialErr. It returns the name of the
// reply it wrote and the write's error.
type replier func(c net.Conn, dialErr error, bound netx.Addr) (reply string, err error)

// socks5Reply answers a SOCKS5 CONNECT.
func socks5Reply(c net.Conn, dialErr error, bound netx.Addr) (string, error) {
	code := replyFor(dialErr)
	return socks5.ReplyText(code), writeReply(c, code, bound)
}

// connect serves a CONNECT, answered by reply. pending holds bytes the
// client sent after its request that were already read; they go to the
// upstream first.
func (s *Server) connect(c net.Conn, pending []byte, flow netx.Flow, reply replier, log *slog.Logger) {
	c.SetDeadline(time.Time{})
	if s.cfg.Sniff {
		s.connectSniffed(c, pending, flow, reply, log)
		return
	}
	up, err := s.dial(c, flow)
	if err != nil {
		text, _ := reply(c, err, netx.Addr{})
		log.Debug("socks connect failed", "destination", flow.Dst, "reply", text, "error", err)
		return
	}
	if _, err := reply(c, nil, boundAddr(up)); err != nil {
		up.Close()
		return
	}
	if len(pending) > 0 {
		if _, err := up.Write(pending); err != nil {
			up.Close()
			return
		}
	}
	relay.Pipe(s.conns.Context(), c, up, 0)
}

// connectSniffed answers the CONNECT at once, reads the client's first bytes
// to sniff the domain, and only then routes the flow. A failed dial can then
// only close the connection.
func (s *Server) connectSniffed(c net.Conn, pending []byte, flow netx.Flow, reply replier, log *slog.Logger) {
	if _, err := reply(c, nil, netx.Addr{}); err != nil {
		return
	}
	first, err := serve.ReadFirst(c, pending, serve.SniffWait)
	if err != nil {
		return
	}
	defer first.Release()
	flow.Protocol, flow.Sniffed = first.Protocol, first.Domain
	up, err := s.dial(c, flow)
	if err != nil {
		log.Debug("socks connect failed", "destination", flow.Dst, "sniffed", flow.Sniffed, "error", err)
		return
	}
	if b := first.Bytes(); len(b) > 0 {
		if _, err := up.Write(b); err != nil {
			up.Close()
			return
		}
	}
	first.Release()
	relay.Pipe(s.conns.Context(), c, up, 0)
}

// dial opens the flow; it is abandoned as soon as the client hangs up.
func (s *Server) dial(c net.Conn, flow netx.Flow) (net.Conn, error) {
	return serve.WhileConnected(s.conns.Context(), c, func(ctx context.Context) (net.Conn, error) {
		return s.conn.ConnectStream(ctx, flow)
	})
}

// boundAddr is the address the upstream connection was made from, when it
// is a TCP address; 0.0.0.0:0 otherwise.
func boundAddr(up net.Conn) netx.Addr {
	if _, ok := up.LocalAddr().(*net.TCPAddr); !ok {
		return netx.Addr{}
	}
	return netx.AddrFromAddrPort(serve.AddrPort(up.LocalAddr()))
}
