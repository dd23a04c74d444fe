package pressure

import (
	"net"
	"sync"
	"time"

	"switchyard/netx"
)

// DefaultTCPCarriers bounds the proxy sockets one runtime keeps for
// sampling; past it the oldest is let go.
const DefaultTCPCarriers = 256

// TCPCarriers is the set of one runtime's physical switchyard-to-proxy TCP
// sockets, each with its Window. The dialer that connects them hands each
// one over (netx.CarrierSink); the runtime owner's heartbeat calls Sample.
// A socket found closed at a Sample leaves the set. Off Linux the set keeps
// nothing: there is no TCP_INFO to read.
type TCPCarriers struct {
	limit int

	mu    sync.Mutex // guards socks, next; never held while a socket is read
	socks []*tcpCarrier
	next  uint64

	sampling sync.Mutex // one Sample at a time: it owns the windows
}

type tcpCarrier struct {
	id     uint64
	conn   *net.TCPConn
	family netx.Family
	win    Window
}

var _ netx.CarrierSink = (*TCPCarriers)(nil)

// NewTCPCarriers returns an empty set holding at most limit sockets (0:
// DefaultTCPCarriers).
func NewTCPCarriers(limit int) *TCPCarriers {
	if limit <= 0 {
		limit = DefaultTCPCarriers
	}
	return &TCPCarriers{limit: limit}
}

// AddCarrier takes a socket just connected to the proxy server.
func (t *TCPCarriers) AddCarrier(c *net.TCPConn) {
	if !TCPInfoAvailable || c == nil {
		return
	}
	f := netx.V4
	if ra, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		f = netx.FamilyOf(ra.AddrPort().Addr())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	if len(t.socks) >= t.limit {
		copy(t.socks, t.socks[1:])
		t.socks[len(t.socks)-1] = nil
		t.socks = t.socks[:len(t.socks)-1]
	}
	t.socks = append(t.socks, &tcpCarrier{id: t.next, conn: c, family: f})
}

// Len is the number of sockets held.
func (t *TCPCarriers) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.socks)
}

// Sample reads every socket at at and returns the active intervals that
// ended there; closed sockets leave the set.
func (t *TCPCarriers) Sample(at time.Time) []Sample {
	t.sampling.Lock()
	defer t.sampling.Unlock()
	t.mu.Lock()
	socks := append([]*tcpCarrier(nil), t.socks...)
	t.mu.Unlock()

	var out []Sample
	var gone map[*tcpCarrier]bool
	for _, s := range socks {
		c, err := readTCP(s.conn)
		if err != nil {
			if gone == nil {
				gone = make(map[*tcpCarrier]bool)
			}
			gone[s] = true
			continue
		}
		c.Carrier, c.Family = s.id, s.family
		if smp, v := s.win.Next(at, c); v == Active {
			out = append(out, smp)
		}
	}
	if gone != nil {
		t.mu.Lock()
		kept := t.socks[:0]
		for _, s := range t.socks {
			if !gone[s] {
				kept = append(kept, s)
			}
		}
		clear(t.socks[len(kept):])
		t.socks = kept
		t.mu.Unlock()
	}
	return out
}
