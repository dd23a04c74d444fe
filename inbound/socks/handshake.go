package socks

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/netx"
	"switchyard/protocol/socks5"
	"switchyard/track"
)

// handle runs one connection: handshake, all of it under hs's deadline,
// then the command.
func (s *Server) handle(c net.Conn, first []byte, hs *serve.Handshake) {
	defer hs.Done()
	src := serve.AddrPort(c.RemoteAddr())
	log := s.log.With("source", src)
	r := &serve.PrefixReader{Head: first, R: c}
	c.SetDeadline(hs.Deadline)

	if s.servedSOCKS4(c, r, src, hs, log) {
		return
	}
	user, ok := s.authenticate(c, r, src, hs.Deadline, log)
	if !ok {
		return
	}
	// SOCKS5 datagrams travel beside the connection, never across it, so
	// the session is charged for them.
	sess := serve.OpenSession(s.conn, track.SessionInfo{User: user, Inbound: s.cfg.Tag, Source: src, ChargeDatagrams: true})
	defer sess.End()
	req, err := socks5.ReadRequest(r)
	if err != nil {
		log.Debug("socks request refused", "error", err)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) &&
			!errors.Is(err, os.ErrDeadlineExceeded) {
			writeReply(c, replyFor(err), netx.Addr{})
		}
		return
	}
	hs.Done()
	flow := netx.Flow{Dst: req.Dst, Src: src, Inbound: s.cfg.Tag, User: user, Session: sess.ID()}
	switch req.Cmd {
	case socks5.CmdConnect:
		flow.Network = netx.TCP
		s.connect(c, r.Head, flow, socks5Reply, log)
	case socks5.CmdUDPAssociate:
		if !s.cfg.UDP {
			log.Debug("socks request refused", "error", "UDP ASSOCIATE is disabled")
			writeReply(c, socks5.ReplyCommandNotSupported, netx.Addr{})
			return
		}
		flow.Network = netx.UDP
		flow.Dst = netx.Addr{}
		s.associate(c, flow, req.Dst, log)
	}
}

// authenticate negotiates the method and, with users configured, checks the
// client's username and password. It returns the user name ("" when
// anonymous) and whether the connection may go on.
func (s *Server) authenticate(c net.Conn, r io.Reader, src netip.AddrPort, deadline time.Time, log *slog.Logger) (string, bool) {
	methods, err := socks5.ReadGreeting(r)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			log.Debug("socks greeting refused", "error", err)
		}
		return "", false
	}
	want := socks5.MethodNoAuth
	if len(s.cfg.Users) > 0 {
		want = socks5.MethodUserPass
	}
	choice := socks5.MethodNoAcceptable
	for _, m := range methods {
		if m == want {
			choice = want
		}
	}
	if _, err := c.Write(socks5.AppendMethodChoice(nil, choice)); err != nil || choice == socks5.MethodNoAcceptable {
		if choice == socks5.MethodNoAcceptable {
			log.Debug("socks greeting refused", "error", "no acceptable authentication method", "offered", methods)
		}
		return "", false
	}
	if choice == socks5.MethodNoAuth {
		return "", true
	}
	user, pass, err := socks5.ReadUserPass(r)
	if err != nil {
		log.Debug("socks authentication failed", "error", err)
		return "", false
	}
	// A source that keeps failing waits before any answer, right or wrong.
	if !s.guard.Wait(s.conns.Context(), src.Addr(), deadline) {
		return "", false
	}
	ok := serve.Authenticate(s.cfg.Users, user, pass)
	if ok {
		s.guard.Succeeded(src.Addr())
	} else {
		s.guard.Failed(src, user, "socks5: wrong username or password")
	}
	if _, err := c.Write(socks5.AppendUserPassStatus(nil, ok)); err != nil || !ok {
		return "", false
	}
	return user, true
}

// writeReply writes a reply under its own deadline.
func writeReply(c net.Conn, code byte, bound netx.Addr) error {
	c.SetWriteDeadline(time.Now().Add(replyTimeout))
	_, err := c.Write(socks5.AppendReply(make([]byte, 0, 22), code, bound))
	c.SetWriteDeadline(time.Time{})
	return err
}
