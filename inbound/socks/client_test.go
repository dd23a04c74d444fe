package socks

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// dial opens a connection to the proxy and negotiates: username/password
// when user is set, no authentication otherwise. It fails the test on any
// refusal; tests of refusals speak the protocol themselves.
func dial(t *testing.T, proxy, user, pass string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	method := socks5.MethodNoAuth
	if user != "" {
		method = socks5.MethodUserPass
	}
	greeting, _ := socks5.AppendGreeting(nil, method)
	mustWrite(t, c, greeting)
	got, err := socks5.ReadMethodChoice(c)
	if err != nil || got != method {
		t.Fatalf("method choice = %#x, %v; want %#x", got, err, method)
	}
	if user != "" {
		creds, _ := socks5.AppendUserPass(nil, user, pass)
		mustWrite(t, c, creds)
		if err := socks5.ReadUserPassStatus(c); err != nil {
			t.Fatalf("authentication: %v", err)
		}
	}
	return c
}

// request sends a request and reads the reply.
func request(t *testing.T, c net.Conn, cmd byte, dst netx.Addr) (code byte, bound netx.Addr) {
	t.Helper()
	req, err := socks5.AppendRequest(nil, cmd, dst)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, req)
	code, bound, err = socks5.ReadReply(c)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	return code, bound
}

func mustWrite(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// echoes checks that what is written on c comes back.
func echoes(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	mustWrite(t, c, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo differs: %d bytes, want %d", len(got), len(msg))
	}
}

// closedByPeer checks that the server closes c.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after refusal = %d, %v; want EOF", n, err)
	}
}
