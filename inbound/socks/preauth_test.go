package socks

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

func startLogged(t *testing.T, cfg Config) (*Server, string, *inboundtest.Logs) {
	t.Helper()
	log, logs := inboundtest.CaptureLogs(t)
	if cfg.Tag == "" {
		cfg.Tag = "socks-in"
	}
	srv := New(cfg, inboundtest.NewConnector(t), log)
	return srv, inboundtest.Serve(t, srv), logs
}

// tryLogin runs a username/password negotiation and reports whether it
// was accepted, and how long the answer took.
func tryLogin(t *testing.T, proxy, user, pass string) (bool, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	greeting, _ := socks5.AppendGreeting(nil, socks5.MethodUserPass)
	mustWrite(t, c, greeting)
	if m, err := socks5.ReadMethodChoice(c); err != nil || m != socks5.MethodUserPass {
		t.Fatalf("method %#x, %v", m, err)
	}
	creds, _ := socks5.AppendUserPass(nil, user, pass)
	start := time.Now()
	mustWrite(t, c, creds)
	err = socks5.ReadUserPassStatus(c)
	return err == nil, time.Since(start)
}

// Wrong passwords are logged at warn, rate-limited, with the source and the
// inbound; after three failures a source's every attempt waits, longer
// with each failure, and a success resets it.
func TestWrongPasswordsAreLoggedAndSlowed(t *testing.T) {
	_, proxy, logs := startLogged(t, Config{Users: []spec.User{{Username: "alice", Password: "s3cret"}}})
	var took []time.Duration
	for range 6 {
		ok, d := tryLogin(t, proxy, "alice", "guess")
		if ok {
			t.Fatal("a wrong password was accepted")
		}
		took = append(took, d)
	}
	warns := logs.Lines(slog.LevelWarn, "authentication failed")
	if len(warns) != 1 {
		t.Fatalf("%d warn lines for 6 failures at once, want 1", len(warns))
	}
	if w := warns[0].Attrs; w["inbound"] != "socks-in" || w["user"] != "alice" {
		t.Fatalf("warn line %v; want the inbound and the user", w)
	}
	if ap, err := netip.ParseAddrPort(warns[0].Attrs["source"]); err != nil || !ap.Addr().IsLoopback() {
		t.Fatalf("warn line source %q", warns[0].Attrs["source"])
	}
	// Attempts 4, 5 and 6 wait at least 100, 200 and 400 ms.
	for i, min := range map[int]time.Duration{3: 100 * time.Millisecond, 4: 200 * time.Millisecond, 5: 400 * time.Millisecond} {
		if took[i] < min {
			t.Fatalf("attempt %d answered after %v, want at least %v (all: %v)", i+1, took[i], min, took)
		}
	}
	// The right password waits too (its source is being slowed), then
	// resets the source.
	if ok, d := tryLogin(t, proxy, "alice", "s3cret"); !ok || d < 800*time.Millisecond {
		t.Fatalf("right password: ok %v after %v; want ok after the 800ms delay", ok, d)
	}
	if ok, _ := tryLogin(t, proxy, "alice", "guess"); ok {
		t.Fatal("a wrong password was accepted")
	}
	if ok, d := tryLogin(t, proxy, "alice", "s3cret"); !ok || d >= 100*time.Millisecond {
		t.Fatalf("after a reset: ok %v after %v; want no delay", ok, d)
	}
}

// Past max_handshakes a new connection is closed at once, counted and
// logged; a slot that frees is taken again.
func TestHandshakeBound(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	srv, proxy, logs := startLogged(t, Config{MaxHandshakes: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitUntil(t, func() bool { return srv.hs.InHandshake() == 2 })

	start := time.Now()
	for range 3 {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection past the bound read %v; want it closed", err)
		}
		c.Close()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("connections past the bound were closed after %v, not at once", d)
	}
	warns := logs.Lines(slog.LevelWarn, "too many connections in their handshake; closing new ones at once")
	if len(warns) != 1 || warns[0].Attrs["limit"] != "2" || warns[0].Attrs["inbound"] != "socks-in" {
		t.Fatalf("warn lines %v; want one naming the limit and the inbound", warns)
	}
	if srv.hs.Refused() != 3 {
		t.Fatalf("%d refusals counted, want 3", srv.hs.Refused())
	}

	// A connection whose handshake is over holds no slot.
	greeting, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	req, _ := socks5.AppendRequest(greeting, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String())))
	mustWrite(t, held[0], req)
	if _, err := socks5.ReadMethodChoice(held[0]); err != nil {
		t.Fatal(err)
	}
	if code, _, err := socks5.ReadReply(held[0]); err != nil || code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x, %v", code, err)
	}
	waitUntil(t, func() bool { return srv.hs.InHandshake() == 1 })
	c := dial(t, proxy, "", "")
	if code, _ := request(t, c, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))); code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x once a slot was free", code)
	}
}

// One deadline covers the whole handshake: a client that keeps sending a
// byte now and then is still closed when it passes.
func TestHandshakeTimeoutCoversTheWholeHandshake(t *testing.T) {
	_, proxy, _ := startLogged(t, Config{HandshakeTimeout: 500 * time.Millisecond})
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	greeting, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	mustWrite(t, c, greeting)
	if _, err := socks5.ReadMethodChoice(c); err != nil {
		t.Fatal(err)
	}
	req, _ := socks5.AppendRequest(nil, socks5.CmdConnect, netx.DomainAddr("example.com", 80))
	go func() {
		for _, b := range req[:len(req)-1] {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection was not closed")
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("closed after %v; want about the 500ms handshake timeout", d)
	}
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A SOCKS4 user id is a credential too: unknown ones are logged at warn and
// slow their source down like wrong SOCKS5 passwords.
func TestUnknownSOCKS4UserIDsAreLoggedAndSlowed(t *testing.T) {
	_, proxy, logs := startLogged(t, Config{Users: []spec.User{{Username: "alice", Password: "s3cret"}}, SOCKS4: true})
	var took []time.Duration
	for range 5 {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.Write(append([]byte{4, 1, 0, 80, 127, 0, 0, 1}, "mallory\x00"...))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var reply [8]byte
		_, err = io.ReadFull(c, reply[:])
		took = append(took, time.Since(start))
		c.Close()
		if err != nil || reply[1] == 0x5a {
			t.Fatalf("an unknown user id got %v, %v", reply, err)
		}
	}
	if warns := logs.Lines(slog.LevelWarn, "authentication failed"); len(warns) != 1 || warns[0].Attrs["user"] != "mallory" {
		t.Fatalf("warn lines %v, want one naming the user id", warns)
	}
	if took[3] < 100*time.Millisecond || took[4] < 200*time.Millisecond {
		t.Fatalf("attempts answered after %v; the 4th and 5th should wait 100 and 200 ms", took)
	}
}
