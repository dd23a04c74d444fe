package socks5

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"

	"switchyard/outbound"
)

// ReplyFor maps the error of a failed dial (or of a request this package
// refused) to the reply code a server answers it with:
//
//   - a refusal by a routing rule (outbound.ErrBlocked): 0x02;
//   - ErrCommandNotSupported, ErrAddressTypeNotSupported: 0x07, 0x08;
//   - connection refused (ECONNREFUSED, or an error whose text says so, as
//     a proxy upstream's may): 0x05;
//   - network unreachable (ENETUNREACH): 0x03;
//   - host unreachable (EHOSTUNREACH), a failed name lookup (*net.DNSError):
//     0x04;
//   - a timeout (ETIMEDOUT, a deadline or a context deadline): 0x04, as most
//     servers answer it; clients show "TTL expired" (0x06) as a puzzle;
//   - anything else: 0x01.
func ReplyFor(err error) byte {
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return ReplySucceeded
	case errors.Is(err, outbound.ErrBlocked):
		return ReplyNotAllowed
	case errors.Is(err, ErrCommandNotSupported):
		return ReplyCommandNotSupported
	case errors.Is(err, ErrAddressTypeNotSupported):
		return ReplyAddressTypeNotSupported
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReplyConnectionRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return ReplyNetworkUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &dnsErr):
		return ReplyHostUnreachable
	case isTimeout(err):
		return ReplyHostUnreachable
	case strings.Contains(err.Error(), "connection refused"):
		return ReplyConnectionRefused
	}
	return ReplyGeneralFailure
}

func isTimeout(err error) bool {
	if errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
