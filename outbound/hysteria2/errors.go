package hysteria2

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	coreerrs "github.com/apernet/hysteria/core/v2/errors"

	"switchyard/netx"
	"switchyard/outbound"
)

// The errors of the connection slot and of the connect attempt.
var (
	errNoUsableAddress = errors.New("hysteria2: the server name resolved to no usable address")
	errBackoff         = netx.WithFault(errors.New("hysteria2: connection is down, waiting before the next attempt"), netx.FaultSharedDial)
	errNoCertificates  = errors.New("hysteria2: the CA file contains no certificates")
	errClosed          = netx.WithFault(errors.New("hysteria2: the outbound is closed"), netx.FaultRetired)
)

// The errors of a datagram link.
var (
	errGone                   = errors.New("hysteria2: the connection behind this association is gone")
	errFrameTooLarge    error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("upstream frame larger than the client runtime's buffer")}
	errDatagramTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("frame larger than the client runtime's buffer")}
)

// The refusals of UDP. Both match outbound.ErrNoUDP: datagrams routed to an
// outbound whose server refuses them go nowhere, as with a protocol without
// UDP.
var (
	errNoRelay     = &udpRefusal{"hysteria2: the server does not relay UDP"}
	errNoDatagrams = &udpRefusal{"hysteria2: the server did not offer QUIC datagrams"}
)

type udpRefusal struct{ text string }

func (e *udpRefusal) Error() string        { return e.text }
func (e *udpRefusal) Is(target error) bool { return target == outbound.ErrNoUDP }

// caReadError and caCertError are the CA file's failures; the text carries
// the cause.
func caReadError(err error) error {
	return fmt.Errorf("hysteria2: could not read the CA file: %w", err)
}

func caCertError(err error) error {
	return fmt.Errorf("hysteria2: the CA file holds an unusable certificate: %w", err)
}

type attemptError struct {
	addr netip.AddrPort
	err  error
}

// noAnswerError is the failure of every address of the server, each with its
// own cause.
type noAnswerError struct{ attempts []attemptError }

func (e *noAnswerError) Error() string {
	parts := make([]string, len(e.attempts))
	for i, a := range e.attempts {
		parts[i] = fmt.Sprintf("%s: %v", a.addr, a.err)
	}
	return "hysteria2: no address answered (" + strings.Join(parts, "; ") + ")"
}

// Unwrap exposes each attempt's error, so errors.Is finds a refusing socket
// hook or an authentication failure among them.
func (e *noAnswerError) Unwrap() []error {
	errs := make([]error, len(e.attempts))
	for i, a := range e.attempts {
		errs[i] = a.err
	}
	return errs
}

// refusedError is the server's refusal of a stream request: its dial of the
// destination failed (core/v2's DialError, whose text carries the server's
// message). It matches syscall.ECONNREFUSED, so inbounds answer it as a
// refused connection.
type refusedError struct{ err error }

func (e *refusedError) Error() string        { return e.err.Error() }
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == syscall.ECONNREFUSED }

// Fault is netx.FaultTargetPath: the server could not reach the target
// (its message does not say whether the target refused or was unreachable).
func (e *refusedError) Fault() (netx.Fault, uint64) { return netx.FaultTargetPath, 0 }

// refusal marks the server's refusal of a stream request; other errors are
// returned as they are.
func refusal(err error) error {
	var de coreerrs.DialError
	if errors.As(err, &de) {
		return &refusedError{err}
	}
	return err
}
