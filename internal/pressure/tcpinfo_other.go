//go:build !linux

package pressure

import (
	"errors"
	"syscall"
)

// errNoTCPInfo: TCP_INFO with the counters the detector needs is Linux's.
var errNoTCPInfo = errors.New("pressure: TCP_INFO is read on Linux only")

// readTCP has no counters to read off Linux: a TCP carrier's intervals
// stay unknown there, proving neither pressure nor recovery.
func readTCP(syscall.Conn) (Counters, error) { return Counters{}, errNoTCPInfo }

// TCPInfoAvailable reports whether this build reads TCP_INFO.
const TCPInfoAvailable = false
