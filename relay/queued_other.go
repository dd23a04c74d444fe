//go:build !linux

package relay

import "syscall"

// waitQueued has nothing to wait on where the standard library does not
// splice: the copy that follows blocks in its own read.
func waitQueued(syscall.RawConn) (int, error) { return spliceChunk, nil }
