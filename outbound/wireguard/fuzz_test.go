package wireguard

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

// message returns a WireGuard-shaped message: its type, reserved bytes
// and a body of n bytes.
func message(typ uint32, reserved [3]byte, n int) []byte {
	b := make([]byte, 4+n)
	binary.LittleEndian.PutUint32(b, typ)
	copy(b[1:4], reserved[:])
	for i := 4; i < len(b); i++ {
		b[i] = byte(i * 7)
	}
	return b
}

// FuzzEndpointMessages sends arbitrary datagrams from the endpoint's
// address to a running tunnel: whatever the peer sends, the tunnel drops
// what it cannot use, never panics, and keeps running.
func FuzzEndpointMessages(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{1},
		{1, 0, 0},
		{4, 0xa1, 0xb2, 0xc3},
		message(1, [3]byte{}, 144),         // a handshake initiation's size
		message(2, [3]byte{1, 2, 3}, 88),   // a handshake response's size, with reserved bytes
		message(3, [3]byte{}, 60),          // a cookie reply's size
		message(4, [3]byte{}, 28),          // the shortest data message
		message(4, [3]byte{9, 9, 9}, 1500), // a data message with reserved bytes
		bytes.Repeat([]byte{0xff}, 65000),  // a large datagram
	} {
		f.Add(seed)
	}
	peerSock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		f.Fatal(err)
	}
	defer peerSock.Close()
	keys := newKeyPair(f)
	o := clientSpec(nil, keys)
	o.Endpoint = peerSock.LocalAddr().String()
	o.Reserved = []byte{0xa1, 0xb2, 0xc3}
	out, err := New(o, netxDeps())
	if err != nil {
		f.Fatal(err)
	}
	defer out.Close()
	r, err := out.tunnels.acquire(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	defer r.Release()
	tun := r.V
	s := tun.bind.sock.Load()
	port := (*s).LocalAddr().(*net.UDPAddr).Port
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}

	f.Fuzz(func(t *testing.T, msg []byte) {
		if _, err := peerSock.WriteTo(msg, to); err != nil && len(msg) < 65000 {
			t.Fatal(err)
		}
		// A datagram that makes the device answer is answered with the
		// reserved bytes; read whatever comes back briefly.
		peerSock.SetReadDeadline(time.Now().Add(time.Millisecond))
		buf := make([]byte, 2048)
		if n, _, err := peerSock.ReadFrom(buf); err == nil && n > 3 && !bytes.Equal(buf[1:4], []byte{0xa1, 0xb2, 0xc3}) {
			t.Fatalf("the tunnel answered without its reserved bytes: % x", buf[:4])
		}
		if !tun.alive() {
			t.Fatal("the tunnel stopped")
		}
	})
}

// netxDeps are dependencies with no hook and discarded logs.
func netxDeps() (d outbound.Deps) {
	d.Dialer = netx.NewDialer(netx.SocketPolicy{}, time.Second)
	d.Servers = resolverOf()
	d.Destinations = resolverOf()
	d.Logger = slog.New(slog.DiscardHandler)
	return d
}
