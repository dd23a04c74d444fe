package socks

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"

	"switchyard/outbound"
	"switchyard/protocol/socks5"
)

// replyFor maps the error of a failed dial (or of a request the server
// refused) to the reply code the client is answered with. It matches kinds
// only (errors.Is, errors.As), never an error's text:
//
//   - a refusal by a routing rule (outbound.ErrBlocked): 0x02;
//   - socks5.ErrCommandNotSupported, ErrAddressTypeNotSupported: 0x07, 0x08;
//   - a refused connection (syscall.ECONNREFUSED, which a proxy server's
//     refusal of the request also matches: a SOCKS5 upstream's failure
//     reply, a Hysteria 2 server's dial error): 0x05;
//   - network unreachable (ENETUNREACH): 0x03;
//   - host unreachable (EHOSTUNREACH), a failed name lookup (*net.DNSError):
//     0x04;
//   - a timeout (ETIMEDOUT, a deadline or a context deadline): 0x04, as most
//     servers answer it; clients show "TTL expired" (0x06) as a puzzle;
//   - anything else: 0x01.
func replyFor(err error) byte {
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return socks5.ReplySucceeded
	case errors.Is(err, outbound.ErrBlocked):
		return socks5.ReplyNotAllowed
	case errors.Is(err, socks5.ErrCommandNotSupported):
		return socks5.ReplyCommandNotSupported
	case errors.Is(err, socks5.ErrAddressTypeNotSupported):
		return socks5.ReplyAddressTypeNotSupported
	case errors.Is(err, syscall.ECONNREFUSED):
		return socks5.ReplyConnectionRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socks5.ReplyNetworkUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &dnsErr):
		return socks5.ReplyHostUnreachable
	case isTimeout(err):
		return socks5.ReplyHostUnreachable
	}
	return socks5.ReplyGeneralFailure
}

func isTimeout(err error) bool {
	if errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
