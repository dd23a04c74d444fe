package pressure

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readTCP reads the socket's TCP_INFO into Counters (Carrier and Family
// are the caller's). It fails when the socket is closed.
func readTCP(sc syscall.Conn) (Counters, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return Counters{}, err
	}
	var (
		info *unix.TCPInfo
		ierr error
	)
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return Counters{}, err
	}
	if ierr != nil {
		return Counters{}, ierr
	}
	return Counters{
		RTT:           time.Duration(info.Rtt) * time.Microsecond,
		Acked:         info.Bytes_acked,
		Payload:       info.Bytes_acked + info.Bytes_received,
		Sent:          info.Bytes_sent,
		Transmissions: uint64(info.Data_segs_out),
		Lost:          uint64(info.Total_retrans),
		LostBytes:     info.Bytes_retrans,
	}, nil
}

// TCPInfoAvailable reports whether this build reads TCP_INFO.
const TCPInfoAvailable = true
