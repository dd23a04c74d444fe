package mixed

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks4"
	"switchyard/spec"
)

// socks4Connect sends a SOCKS4 CONNECT and returns the connection and the
// reply's code. The reply must come within a second: a SOCKS4 client is not
// kept waiting for an HTTP answer.
func socks4Connect(t *testing.T, proxy string, dst netx.Addr, userID string) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, err := socks4.AppendRequest(nil, socks4.CmdConnect, dst, userID)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	code, _, err := socks4.ReadReply(c)
	if err != nil {
		t.Fatalf("SOCKS4 reply: %v", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, code
}

func TestSOCKS4OnMixed(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	ap := netip.MustParseAddrPort(echo.Addr().String())
	conn := inboundtest.NewConnector(t)
	proxy := inboundtest.Serve(t, New(Config{Tag: "m"}, conn, inboundtest.Logger(t)))

	for _, dst := range []netx.Addr{netx.AddrFromAddrPort(ap), netx.DomainAddr("localhost", ap.Port())} {
		c, code := socks4Connect(t, proxy, dst, "")
		if code != socks4.ReplyGranted {
			t.Fatalf("%v: reply %#x (%s)", dst, code, socks4.ReplyText(code))
		}
		roundTrip(t, c, c, "via socks4 to "+dst.String())
	}
	flows := conn.Flows()
	if len(flows) != 2 || flows[0].Dst != netx.AddrFromAddrPort(ap) || flows[1].Dst != netx.DomainAddr("localhost", ap.Port()) {
		t.Fatalf("flows %+v", flows)
	}
	for _, f := range flows {
		if f.Inbound != "m" || f.Network != netx.TCP {
			t.Fatalf("flow %+v", f)
		}
	}
}

// Users and socks4 hold on a mixed inbound as on a socks one.
func TestSOCKS4UsersOnMixed(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	users := []spec.User{{Username: "u", Password: "p"}}

	off := inboundtest.Serve(t, New(Config{Users: users}, inboundtest.NewConnector(t), inboundtest.Logger(t)))
	if _, code := socks4Connect(t, off, dst, "u"); code != socks4.ReplyRejected {
		t.Fatalf("users without socks4: reply %#x, want 0x5b", code)
	}

	conn := inboundtest.NewConnector(t)
	on := inboundtest.Serve(t, New(Config{Users: users, SOCKS4: true}, conn, inboundtest.Logger(t)))
	if _, code := socks4Connect(t, on, dst, "nobody"); code != socks4.ReplyUserIDNotAllowed {
		t.Fatalf("unknown user id: reply %#x, want 0x5d", code)
	}
	c, code := socks4Connect(t, on, dst, "u")
	if code != socks4.ReplyGranted {
		t.Fatalf("user's name: reply %#x", code)
	}
	roundTrip(t, c, c, "as u")
	if f := conn.Flows(); len(f) != 1 || f[0].User != "u" {
		t.Fatalf("flows %+v", f)
	}
}
