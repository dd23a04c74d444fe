package transport

import (
	"errors"

	"switchyard/netx"
)

// framingError is a fixed error for server bytes that break a transport's
// framing, carrying netx.FaultFraming: the node's, whatever the target.
func framingError(text string) error {
	return &netx.FaultError{Kind: netx.FaultFraming, Err: errors.New(text)}
}
