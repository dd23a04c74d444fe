package tun

import (
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/tun/tuntest"

	"switchyard/netx"
)

// Any bytes read from the device: the echo parser and the stack take them
// without panicking.
func FuzzDevicePacket(f *testing.F) {
	f.Add(tuntest.Ping(netip.MustParseAddr("192.0.2.1"), appV4))
	f.Add([]byte{0x45, 0, 0, 20})
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 58, 64})
	dev := tuntest.NewChannelTUN()
	in, err := run(Config{Tag: "t", MTU: 1500}, dev.TUN(), &fakeConnector{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer in.Close()
	f.Fuzz(func(t *testing.T, p []byte) {
		parseEcho(p)
		in.stack.InjectBatch([][]byte{p, p})
	})
}

// A reply's source is always one the association can write from.
func FuzzReplySource(f *testing.F) {
	f.Add("198.18.0.5", uint16(443), "", uint16(443))
	f.Fuzz(func(t *testing.T, sent string, port uint16, name string, fromPort uint16) {
		var s sentTo
		if a, err := netip.ParseAddr(sent); err == nil {
			s.note(netip.AddrPortFrom(a, port))
		}
		ap, ok := s.source(netxAddr(name, fromPort), func(netip.Addr) bool { return true })
		if ok && !ap.Addr().IsValid() {
			t.Fatalf("source %v accepted", ap)
		}
	})
}

func netxAddr(name string, port uint16) netx.Addr {
	if a, err := netip.ParseAddr(name); err == nil {
		return netx.Addr{IP: a, Port: port}
	}
	return netx.Addr{Name: name, Port: port}
}
