package socks

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/protocol/socks5"
)

// Errors callers test with errors.Is.
var (
	// ErrHandshakeClosed: the server closed the connection before the
	// handshake was over. It matches io.ErrUnexpectedEOF.
	ErrHandshakeClosed = proxyconn.KindError("socks: server closed during the handshake", io.ErrUnexpectedEOF)
	// ErrRelayDomain: an association's relay is named by a domain. It
	// matches errors.ErrUnsupported.
	ErrRelayDomain = proxyconn.KindError("socks: the relay address is a domain", errors.ErrUnsupported)
	// ErrControlClosed: an association's control connection ended, so the
	// association is over. It matches syscall.EPIPE; its fault is
	// netx.FaultSharedSource (the server ended the packet endpoint every
	// peer of the association shares).
	ErrControlClosed = netx.WithFault(proxyconn.KindError("socks: the control connection closed", syscall.EPIPE), netx.FaultSharedSource)
)

// RejectedError is the server's refusal of a request: a reply with a
// non-zero status. It matches syscall.ECONNREFUSED, so the SOCKS inbound
// answers it as a refused connection.
type RejectedError struct{ Status byte }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("server rejects request: %d (%s)", e.Status, socks5.ReplyText(e.Status))
}

func (e *RejectedError) Is(target error) bool { return target == syscall.ECONNREFUSED }

// Fault is what the status says of the failure (netx.Faulted): the target
// refused (connection refused, or not allowed by the server's ruleset) or
// was unreachable (network or host unreachable, TTL expired); any other
// status names no target and is the server's (a general failure included:
// it does not say the target failed).
func (e *RejectedError) Fault() (netx.Fault, uint64) {
	switch e.Status {
	case socks5.ReplyConnectionRefused, socks5.ReplyNotAllowed:
		return netx.FaultTargetRefused, 0
	case socks5.ReplyNetworkUnreachable, socks5.ReplyHostUnreachable, socks5.ReplyTTLExpired:
		return netx.FaultTargetPath, 0
	}
	return netx.FaultProxyProtocol, 0
}

// auth is the method negotiation of one outbound, encoded once.
type auth struct {
	method   byte   // the one method offered
	greeting []byte // VER NMETHODS METHOD
	userPass []byte // the RFC 1929 request; nil without credentials
}

// newAuth offers username and password (0x02) when a username is set, no
// authentication (0x00) otherwise.
func newAuth(user, pass string) (auth, error) {
	if user == "" {
		if pass != "" {
			return auth{}, errors.New("socks: a password without a username")
		}
		g, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
		return auth{method: socks5.MethodNoAuth, greeting: g}, nil
	}
	up, err := socks5.AppendUserPass(nil, user, pass)
	if err != nil {
		return auth{}, err
	}
	g, _ := socks5.AppendGreeting(nil, socks5.MethodUserPass)
	return auth{method: socks5.MethodUserPass, greeting: g, userPass: up}, nil
}

// negotiate offers the one method and, for username and password, runs the
// RFC 1929 round. Replies are read to their exact length, so no byte past
// them is consumed.
func (a *auth) negotiate(rw io.ReadWriter) error {
	if _, err := rw.Write(a.greeting); err != nil {
		return err
	}
	m, err := socks5.ReadMethodChoice(rw)
	if err != nil {
		return closed(err)
	}
	if m != a.method {
		return netx.WithFault(fmt.Errorf("socks: server chose method %#02x, which was not offered", m), netx.FaultProxyProtocol)
	}
	if a.userPass == nil {
		return nil
	}
	if _, err := rw.Write(a.userPass); err != nil {
		return err
	}
	return closed(socks5.ReadUserPassStatus(rw))
}

// request sends cmd naming addr and reads the reply. A non-zero status is a
// *RejectedError; success returns the address the reply names.
func request(rw io.ReadWriter, cmd byte, addr netx.Addr) (netx.Addr, error) {
	var buf [socks5.MaxUDPHeaderLen]byte // VER CMD RSV and the longest address: as long as the longest UDP header
	req, err := socks5.AppendRequest(buf[:0], cmd, addr)
	if err != nil {
		return netx.Addr{}, err
	}
	if _, err := rw.Write(req); err != nil {
		return netx.Addr{}, err
	}
	status, bound, err := socks5.ReadReply(rw)
	if err != nil {
		return netx.Addr{}, closed(err)
	}
	if status != socks5.ReplySucceeded {
		return netx.Addr{}, &RejectedError{Status: status}
	}
	return bound, nil
}

// closed turns an end of stream in the middle of a reply into
// ErrHandshakeClosed; other errors are returned as they are.
func closed(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ErrHandshakeClosed
	}
	return err
}
