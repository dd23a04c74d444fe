package netx

import (
	"errors"
	"net/netip"
)

// A run of datagrams to one peer goes out of a UDP socket in one system
// call where the kernel can cut it (UDP_SEGMENT, Linux 4.18 and later):
// every datagram of the run but the last has the run's size, the last no
// more. The bounds of a run:
//
//   - segmentMaxCount, the kernel's UDP_MAX_SEGMENTS before Linux 6.9
//     (later kernels take twice as many; 64 already turns 64 system calls
//     into one);
//   - segmentMaxSize, the largest datagram sent segmented: each segment
//     leaves as one IP packet, which has to fit the path's MTU, and the
//     kernel refuses the whole send (EINVAL) otherwise. 1,400 bytes and
//     the IPv6 and UDP headers fit every Ethernet path and most tunnels;
//     larger datagrams go one a send, as they always did;
//   - segmentMaxBytes, the most one send carries, under the 64 KiB an IP
//     packet can hold with its headers.
//
// A kernel that refuses a segmented send (EINVAL, EIO when the route's
// device cannot offload the checksum, EMSGSIZE) has the run sent one
// datagram a send, and the socket never segments again: the refusal is
// the kernel's or the route's, not the run's.
const (
	segmentMaxCount = 64
	segmentMaxSize  = 1400
	segmentMaxBytes = 65000
)

// segmentRun returns how many of ps, from the first, go out in one
// segmented send: 1 when the first cannot lead a run.
func segmentRun(ps [][]byte) int {
	s := len(ps[0])
	if s == 0 || s > segmentMaxSize {
		return 1
	}
	total, n := s, 1
	for n < len(ps) && n < segmentMaxCount {
		l := len(ps[n])
		if l == 0 || l > s || total+l > segmentMaxBytes {
			break
		}
		total += l
		n++
		if l < s {
			break // only the last may be shorter
		}
	}
	return n
}

// sendSegmented sends ps, a run of segmentRun, to the IP destination to
// on c in one segmented send; errSegmentsRefused when the kernel will not.
// A variable for tests.
var sendSegmented = sendSegmentedOS

var errSegmentsRefused = errors.New("udp: segmented sends refused")

// WriteBatchTo sends ps, in order, to the IP destination to from the
// socket of its family: each run of them (segmentRun) in one system call
// where the kernel segments them, else one datagram a send. It returns
// how many it sent.
func (u *DualUDP) WriteBatchTo(ps [][]byte, to netip.AddrPort) (int, error) {
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	f := FamilyOf(to.Addr())
	c := u.socks[f]
	if c == nil {
		return 0, errNoFamilySocket(to)
	}
	if !u.used[f].Load() {
		u.use(f)
	}
	sent := 0
	for sent < len(ps) {
		n := 1
		if !u.unsegmented.Load() && to.Addr().Zone() == "" {
			n = segmentRun(ps[sent:])
		}
		if n > 1 {
			err := sendSegmented(c, ps[sent:sent+n], to)
			if err == nil {
				sent += n
				continue
			}
			if !errors.Is(err, errSegmentsRefused) {
				return sent, err
			}
			u.unsegmented.Store(true)
		}
		for _, p := range ps[sent : sent+n] {
			if err := sendDatagram(c, p, to); err != nil {
				return sent, err
			}
			sent++
		}
	}
	return sent, nil
}
