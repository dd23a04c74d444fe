package xudp

import (
	"net"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/mux"
)

// An END|ERROR closes the session, a source every peer it carried shares:
// the link fails for good with one episode of its own (netx.FaultXUDPEnd),
// the same on every read, and another session's end is another episode.
func TestEndErrorIsOneSharedSourceEpisode(t *testing.T) {
	end, _ := mux.AppendFrame(nil, &mux.Frame{Status: mux.StatusEnd, Option: mux.OptionError})
	read := func() (uint64, uint64) {
		c := proxytest.Dial(t, func(c net.Conn) { c.Write(end) })
		l := NewLink(c, netx.DomainAddr("a.test", 53), [8]byte{1}, bufSize, reserve)
		defer l.Close()
		var eps [2]uint64
		for i := range eps {
			_, _, err := l.ReadPacket(make([]byte, 64))
			f, ep := netx.FaultOf(err)
			if f != netx.FaultXUDPEnd || ep == 0 {
				t.Fatalf("read %d: %v (fault %v, episode %d)", i, err, f, ep)
			}
			eps[i] = ep
		}
		return eps[0], eps[1]
	}
	a1, a2 := read()
	b1, _ := read()
	if a1 != a2 || a1 == b1 {
		t.Fatalf("episodes %d, %d of one session and %d of another", a1, a2, b1)
	}
}
