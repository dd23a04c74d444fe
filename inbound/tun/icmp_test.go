package tun

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/tun/tuntest"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

type fakePinger struct{ direct map[netip.Addr]bool }

func (p fakePinger) Echo(_ context.Context, _, dst netip.Addr, payload []byte) ([]byte, bool, error) {
	if !p.direct[dst] {
		return nil, false, nil
	}
	return append([]byte("re:"), payload...), true, nil
}

// An echo request is relayed when its destination routes direct and
// refused with an unreachable otherwise (and without a pinger): never
// answered by the stack as if every address replied.
func TestEchoIsRelayedOrRefused(t *testing.T) {
	direct := netip.MustParseAddr("192.0.2.1")
	for _, tc := range []struct {
		name     string
		ping     Pinger
		dst      netip.Addr
		wantType header.ICMPv4Type
	}{
		{"direct", fakePinger{map[netip.Addr]bool{direct: true}}, direct, header.ICMPv4EchoReply},
		{"proxied", fakePinger{map[netip.Addr]bool{direct: true}}, netip.MustParseAddr("192.0.2.2"), header.ICMPv4DstUnreachable},
		{"no pinger", nil, direct, header.ICMPv4DstUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := tuntest.NewChannelTUN()
			in, err := run(Config{Tag: "t", MTU: 1500, Ping: tc.ping}, dev.TUN(), &fakeConnector{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			req := tuntest.Ping(tc.dst, appV4)
			dev.Outbound <- req
			select {
			case p := <-dev.Inbound:
				ip := header.IPv4(p)
				if !ip.IsValid(len(p)) || ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) {
					t.Fatalf("answer %x", p)
				}
				if ip.SourceAddress().String() != tc.dst.String() || ip.DestinationAddress().String() != appV4.String() {
					t.Fatalf("answer from %s to %s", ip.SourceAddress(), ip.DestinationAddress())
				}
				if ip.CalculateChecksum() != 0xffff {
					t.Fatal("bad IP checksum")
				}
				m := header.ICMPv4(ip.Payload())
				if m.Type() != tc.wantType {
					t.Fatalf("type %d, want %d", m.Type(), tc.wantType)
				}
				if tc.wantType == header.ICMPv4EchoReply {
					q := header.ICMPv4(header.IPv4(req).Payload())
					if m.Ident() != q.Ident() || m.Sequence() != q.Sequence() || string(m.Payload()[:3]) != "re:" {
						t.Fatalf("reply %x to %x", m, q)
					}
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no answer to an echo request")
			}
		})
	}
}
