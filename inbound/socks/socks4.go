package socks

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"switchyard/inbound/internal/serve"
	"switchyard/netx"
	"switchyard/protocol/socks4"
)

// socks4ReadBuf is the read buffer of a SOCKS4 request: its strings are read
// byte by byte from it. The request's caps (socks4.MaxUserIDLen,
// socks4.MaxNameLen) bound what is read, not this size.
const socks4ReadBuf = 512

// servedSOCKS4 reads the connection's first byte, which r keeps to be read
// again, and serves the connection as SOCKS4 when it is that version. It
// reports whether the connection is over: served as SOCKS4, or ended before
// its first byte.
func (s *Server) servedSOCKS4(c net.Conn, r *serve.PrefixReader, src netip.AddrPort, hs *serve.Handshake, log *slog.Logger) bool {
	if len(r.Head) == 0 {
		var b [1]byte
		if _, err := io.ReadFull(r.R, b[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				log.Debug("socks connection ended before its first byte", "error", err)
			}
			return true
		}
		r.Head = b[:]
	}
	if r.Head[0] != socks4.Version {
		return false
	}
	s.serveSOCKS4(c, r, src, hs, log)
	return true
}

// serveSOCKS4 serves a SOCKS4 or SOCKS4a request, which r holds from its
// version byte on, under the deadline the connection already has. Only
// CONNECT is served; as SOCKS4 carries no password, an inbound with users
// accepts it only when SOCKS4 is enabled, and then only for a user id that
// is one of the users' names.
func (s *Server) serveSOCKS4(c net.Conn, r *serve.PrefixReader, src netip.AddrPort, hs *serve.Handshake, log *slog.Logger) {
	br := bufio.NewReaderSize(r, socks4ReadBuf)
	req, err := socks4.ReadRequest(br)
	if err != nil {
		log.Debug("socks4 request refused", "error", err)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
			writeReply4(c, socks4.ReplyRejected, netip.AddrPort{})
		}
		return
	}
	checked := len(s.cfg.Users) > 0 && s.cfg.SOCKS4
	// A source that keeps failing waits before any answer, right or wrong,
	// as for SOCKS5 passwords: a user id is all SOCKS4 has to guess.
	if checked && !s.guard.Wait(s.conns.Context(), src.Addr(), hs.Deadline) {
		return
	}
	user, refusal, why := s.socks4User(req.UserID)
	if refusal != 0 {
		if refusal == socks4.ReplyUserIDNotAllowed {
			s.guard.Failed(src, req.UserID, "socks4: unknown user id")
		}
		log.Debug("socks4 request refused", "user_id", req.UserID, "reply", socks4.ReplyText(refusal), "error", why)
		writeReply4(c, refusal, netip.AddrPort{})
		return
	}
	if checked {
		s.guard.Succeeded(src.Addr())
	}
	hs.Done()
	flow := netx.Flow{Network: netx.TCP, Dst: req.Dst, Src: src, Inbound: s.cfg.Tag, User: user}
	s.connect(c, unread(br, r), flow, socks4Reply, log)
}

// socks4User returns the flow's user for a request's user id: "" when the
// inbound has no users, the matching user's name otherwise. A non-zero
// refusal is the reply that refuses the request, and why says why. Every
// name is compared, each in constant time.
func (s *Server) socks4User(id string) (user string, refusal byte, why string) {
	if len(s.cfg.Users) == 0 {
		return "", 0, ""
	}
	if !s.cfg.SOCKS4 {
		return "", socks4.ReplyRejected, "SOCKS4 carries no password: it is refused on an inbound with users unless socks4 = true"
	}
	match := 0
	for _, u := range s.cfg.Users {
		match |= subtle.ConstantTimeCompare([]byte(u.Username), []byte(id))
	}
	if match != 1 {
		return "", socks4.ReplyUserIDNotAllowed, "the user id is not one of the inbound's users"
	}
	return id, 0, ""
}

// unread returns what was read from r past the request: br's buffered bytes,
// then what r still holds.
func unread(br *bufio.Reader, r *serve.PrefixReader) []byte {
	b, _ := br.Peek(br.Buffered())
	if len(r.Head) == 0 {
		return b
	}
	return append(append([]byte(nil), b...), r.Head...)
}

// socks4Reply answers a SOCKS4 CONNECT: granted, or rejected whatever the
// dial's failure.
func socks4Reply(c net.Conn, dialErr error, bound netx.Addr) (string, error) {
	code := socks4.ReplyGranted
	if dialErr != nil {
		code = socks4.ReplyRejected
	}
	ap, _ := bound.AddrPort()
	return socks4.ReplyText(code), writeReply4(c, code, ap)
}

// writeReply4 writes a SOCKS4 reply under its own deadline.
func writeReply4(c net.Conn, code byte, bound netip.AddrPort) error {
	c.SetWriteDeadline(time.Now().Add(replyTimeout))
	_, err := c.Write(socks4.AppendReply(make([]byte, 0, 8), code, bound))
	c.SetWriteDeadline(time.Time{})
	return err
}
