package mixed

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBothProtocolsOnOneListener(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	target := echo.Addr().String()
	conn := inboundtest.NewConnector(t)
	proxy := inboundtest.Serve(t, New(Config{Tag: "m", UDP: true}, conn, inboundtest.Logger(t)))

	// SOCKS5 CONNECT.
	s, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(10 * time.Second))
	msg, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	msg, _ = socks5.AppendRequest(msg, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(target)))
	s.Write(msg)
	if m, err := socks5.ReadMethodChoice(s); err != nil || m != socks5.MethodNoAuth {
		t.Fatalf("socks method %#x, %v", m, err)
	}
	if code, _, err := socks5.ReadReply(s); err != nil || code != socks5.ReplySucceeded {
		t.Fatalf("socks reply %#x, %v", code, err)
	}
	roundTrip(t, s, s, "via socks")

	// SOCKS5 UDP ASSOCIATE: UDP is on for the SOCKS side.
	u, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.SetDeadline(time.Now().Add(10 * time.Second))
	msg, _ = socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	msg, _ = socks5.AppendRequest(msg, socks5.CmdUDPAssociate, netx.Addr{})
	u.Write(msg)
	socks5.ReadMethodChoice(u)
	if code, _, err := socks5.ReadReply(u); err != nil || code != socks5.ReplySucceeded {
		t.Fatalf("udp associate reply %#x, %v", code, err)
	}

	// HTTP CONNECT.
	h, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(h, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	br := bufio.NewReader(h)
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 200 Connection established\r\n" {
		t.Fatalf("http status %q, %v", line, err)
	}
	br.ReadString('\n')
	roundTrip(t, h, br, "via http")

	flows := conn.Flows()
	if len(flows) != 3 {
		t.Fatalf("%d flows, want 3", len(flows))
	}
	for _, f := range flows {
		if f.Inbound != "m" {
			t.Fatalf("flow of inbound %q", f.Inbound)
		}
	}
}

// Users hold for both protocols.
func TestUsersForBoth(t *testing.T) {
	conn := inboundtest.NewConnector(t)
	proxy := inboundtest.Serve(t, New(Config{Users: []spec.User{{Username: "u", Password: "p"}}}, conn, inboundtest.Logger(t)))

	s, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	msg, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	s.Write(msg)
	if _, err := socks5.ReadMethodChoice(s); err != socks5.ErrNoAcceptableMethod {
		t.Fatalf("socks without credentials: %v", err)
	}

	h, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	io.WriteString(h, "GET http://example.com/ HTTP/1.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(h), nil)
	if err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("http without credentials: %v %v", resp, err)
	}
}

func roundTrip(t *testing.T, w io.Writer, r io.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(w, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(r, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q, %v", got, err)
	}
}
