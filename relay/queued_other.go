//go:build !linux

package relay

import "syscall"

// canWaitQueued: there is no waiting for bytes on a socket here, so the copy
// path holds its buffer while it waits in a read.
const canWaitQueued = false

// waitQueued has nothing to wait on where the standard library does not
// splice: the copy that follows blocks in its own read.
func waitQueued(syscall.RawConn) (int, error) { return spliceChunk, nil }
