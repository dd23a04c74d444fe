package netx

import "errors"

// ErrEndUnsignalled is what CloseWrite returns from a conn that has
// stopped sending but has no way to tell its peer so (XHTTP's packet-up:
// no request marks the end of the upload). The peer goes on waiting for
// more and never ends the other direction on that account: whoever
// half-closed gives that direction a short wait only (the relay). A layer
// above that tells the peer itself (VMess's end chunk) returns nil
// instead.
var ErrEndUnsignalled = errors.New("the end of the stream cannot be told to the peer")
