//go:build !linux

package netx

import (
	"net"
	"net/netip"
)

func sendSegmentedOS(*net.UDPConn, [][]byte, netip.AddrPort) error { return errSegmentsRefused }
