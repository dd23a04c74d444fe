package socks

import (
	"bytes"
	"io"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// scripted is a server that answers with fixed bytes and swallows what the
// client writes.
type scripted struct{ r *bytes.Reader }

func (s scripted) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s scripted) Write(p []byte) (int, error) { return len(p), nil }

// FuzzHandshake feeds arbitrary server bytes to both handshakes: they fail
// or succeed without panicking, and a relay they accept is one a datagram can
// be sent to.
func FuzzHandshake(f *testing.F) {
	f.Add(false, []byte("\x05\x00\x05\x00\x00\x01\x7f\x00\x00\x01\x04\x38"))
	f.Add(true, []byte("\x05\x02\x01\x00\x05\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x04\x38tail"))
	f.Add(false, []byte("\x05\x00\x05\x00\x00\x03\x0drelay.example\x04\x38"))
	f.Add(true, []byte("\x05\x02\x01\x01"))
	f.Add(false, []byte("\x05\xff"))
	f.Add(false, []byte("\x05\x00\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00"))
	f.Add(false, []byte("\x05\x00\x05\x00\x00\x03\x00\x00\x00"))
	f.Add(false, []byte("\x04\x00"))
	f.Fuzz(func(t *testing.T, withAuth bool, server []byte) {
		a, _ := newAuth("", "")
		if withAuth {
			a, _ = newAuth("user", "pass")
		}
		for _, cmd := range []byte{socks5.CmdConnect, socks5.CmdUDPAssociate} {
			s := scripted{bytes.NewReader(server)}
			err := a.negotiate(s)
			var bound netx.Addr
			if err == nil {
				bound, err = request(s, cmd, netx.DomainAddr("example.com", 443))
			}
			if err != nil {
				return
			}
			if cmd != socks5.CmdUDPAssociate {
				continue
			}
			relay, err := relayAddr(bound, &netAddr{"127.0.0.1:1080"})
			if err == nil && (!relay.IsValid() || relay.Port() == 0 || relay.Addr().Is4In6() || relay.Addr().IsUnspecified()) {
				t.Fatalf("reply naming %v gave relay %v", bound, relay)
			}
		}
	})
}

// The handshake reads each reply to its exact length.
func TestHandshakeLeavesTheRest(t *testing.T) {
	server := []byte("\x05\x00\x05\x00\x00\x01\x7f\x00\x00\x01\x04\x38after")
	s := scripted{bytes.NewReader(server)}
	a, _ := newAuth("", "")
	if err := a.negotiate(s); err != nil {
		t.Fatal(err)
	}
	bound, err := request(s, socks5.CmdConnect, netx.DomainAddr("example.com", 443))
	if err != nil || bound != netx.AddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:1080")) {
		t.Fatalf("bound %v, %v", bound, err)
	}
	rest, _ := io.ReadAll(s.r)
	if string(rest) != "after" {
		t.Fatalf("left %q", rest)
	}
}

type netAddr struct{ s string }

func (a *netAddr) Network() string { return "tcp" }
func (a *netAddr) String() string  { return a.s }
