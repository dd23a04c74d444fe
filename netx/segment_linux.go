package netx

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// segmentOOBLen is the size of the UDP_SEGMENT control message.
var segmentOOBLen = unix.CmsgSpace(2)

func sendSegmentedOS(c *net.UDPConn, ps [][]byte, to netip.AddrPort) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var buf [32]byte
	oob := buf[:segmentOOBLen]
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(len(ps[0])))
	var e unix.Errno
	err = rc.Write(func(fd uintptr) bool {
		e = sendmsg(fd, ps, oob, to)
		return e != unix.EAGAIN
	})
	if err == nil && e != 0 {
		err = e
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EIO), errors.Is(err, unix.EMSGSIZE), errors.Is(err, unix.ENOPROTOOPT):
		return errSegmentsRefused
	}
	return &net.OpError{Op: "write", Net: "udp", Addr: net.UDPAddrFromAddrPort(to), Err: os.NewSyscallError("sendmsg", err)}
}
