package pressure

import (
	"net"
	"testing"
)

// The set keeps at most its limit of sockets, letting the oldest go.
func TestTCPCarriersBounded(t *testing.T) {
	if !TCPInfoAvailable {
		t.Skip("no TCP_INFO on this system: the set keeps nothing")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	set := NewTCPCarriers(2)
	var conns []*net.TCPConn
	for range 3 {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c.(*net.TCPConn))
		set.AddCarrier(c.(*net.TCPConn))
	}
	if set.Len() != 2 {
		t.Fatalf("%d kept, want 2", set.Len())
	}
	set.mu.Lock()
	first := set.socks[0].conn
	set.mu.Unlock()
	if first != conns[1] {
		t.Fatal("the oldest socket was kept")
	}
}
