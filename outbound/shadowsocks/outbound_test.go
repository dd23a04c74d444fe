package shadowsocks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	ss "switchyard/protocol/shadowsocks"
	"switchyard/spec"
)

func deps() outbound.Deps {
	return outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 0), Servers: netx.SystemResolver{}, Logger: slog.New(slog.DiscardHandler)}
}

func build(t *testing.T, server, method, password string) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "ss", Type: "shadowsocks", Server: server, Method: method, Password: password, UDP: true}, deps())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestNewRefusals(t *testing.T) {
	for _, tc := range []struct {
		o    spec.Outbound
		want string
	}{
		{spec.Outbound{Server: "127.0.0.1:1", Method: "aes-128-cfb", Password: "x"}, `unknown shadowsocks method "aes-128-cfb"`},
		{spec.Outbound{Server: "127.0.0.1:1", Method: "2022-blake3-aes-128-gcm", Password: "short"}, "not base64"},
		{spec.Outbound{Server: "no port", Method: "aes-128-gcm", Password: "x"}, "bad address"},
		{spec.Outbound{Server: "127.0.0.1:1", Method: "aes-128-gcm", Password: "x", AddressFamily: "v5"}, "unknown address family"},
	} {
		if _, err := New(tc.o, deps()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestProbeTarget(t *testing.T) {
	o := build(t, "192.0.2.1:8388", "aes-256-gcm", "x")
	if got := o.ProbeTarget(); got.String() != "192.0.2.1:8388" {
		t.Fatalf("probe target %v", got)
	}
}

// The request is on the wire when DialStream returns, alone; the stream
// then carries bytes both ways and half-closes.
func TestStreamThroughServer(t *testing.T) {
	srv := startAEADServer(t, "secret")
	o := build(t, srv.ln.Addr().String(), "aes-128-gcm", "secret")
	dst := netx.Addr{IP: netip.MustParseAddr("198.51.100.9"), Port: 443}
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case addr := <-srv.targets:
		want := []byte{1, 198, 51, 100, 9, 1, 187}
		if !bytes.Equal(addr, want) {
			t.Fatalf("the server read the target %x, want %x", addr, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not on the wire after DialStream returned")
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	payload := make([]byte, 300000)
	rand.Read(payload)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(interface{ CloseWrite() error }).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("echo of %d bytes differs (%d back)", len(payload), len(got))
	}
}

// A wrong password is found on the first Read: the server's chunks do not
// authenticate.
func TestWrongPassword(t *testing.T) {
	srv := startAEADServer(t, "secret")
	o := build(t, srv.ln.Addr().String(), "aes-128-gcm", "secret")
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-srv.targets
	// Another client's key opens nothing the server sends.
	bad := build(t, srv.ln.Addr().String(), "aes-128-gcm", "other")
	bc, err := bad.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	bc.SetDeadline(time.Now().Add(time.Second))
	if _, err := bc.Read(make([]byte, 10)); err == nil {
		t.Fatal("a read with the wrong password succeeded")
	}
}

func TestDialRefused(t *testing.T) {
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	o := build(t, addr, "2022-blake3-aes-128-gcm", base64.StdEncoding.EncodeToString(make([]byte, 16)))
	_, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)})
	if err == nil || !strings.Contains(err.Error(), "dial shadowsocks[ss]: ") {
		t.Fatalf("a refused upstream: %v", err)
	}
}

// A handshake that cannot be written in time fails the dial with the
// context's error.
func TestHandshakeHonoursContext(t *testing.T) {
	o := build(t, "127.0.0.1:1", "aes-128-gcm", "x")
	client, server := net.Pipe() // nobody reads server: the write blocks
	defer server.Close()
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := o.handshake(ctx, client, netx.DomainAddr("example.com", 80))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handshake: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the handshake outlived its context")
	}

	client2, server2 := net.Pipe()
	defer server2.Close()
	defer client2.Close()
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	if _, err := o.handshake(ctx2, client2, netx.DomainAddr("example.com", 80)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled handshake: %v", err)
	}
}

// A write stages in a small buffer when it fits one, else in one of the
// method's BufSize, taken for that write only: writes of every size echo
// whole, and a flow holds no staging buffer between writes.
func TestTheStagingBufferFitsEachWrite(t *testing.T) {
	srv := startAEADServer(t, "secret")
	o := build(t, srv.ln.Addr().String(), "aes-128-gcm", "secret")
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.Addr{IP: netip.MustParseAddr("198.51.100.9"), Port: 443}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.(*stream)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, tc := range []struct{ write, stage int }{
		{100, startBuf}, {startBuf - ss.RecordOverhead, startBuf}, {startBuf, s.size}, {10, startBuf}, {3 * s.size, s.size},
	} {
		if got := s.stageSize(tc.write); got != tc.stage {
			t.Fatalf("a write of %d bytes stages in %d, want %d", tc.write, got, tc.stage)
		}
		p := make([]byte, tc.write)
		for i := range p {
			p[i] = byte(i)
		}
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, tc.write)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("echo of %d bytes: %v", tc.write, err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("echo of %d bytes differs", tc.write)
		}
	}
}

// Writes in steady state allocate nothing, small or large.
func TestWritesDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own, and drops pooled items")
	}
	c, err := ss.New("2022-blake3-aes-128-gcm", "AAAAAAAAAAAAAAAAAAAAAA==")
	if err != nil {
		t.Fatal(err)
	}
	_, sealer, _, err := c.Request(nil, netx.Addr{IP: netip.MustParseAddr("198.51.100.9"), Port: 443})
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{Conn: discardConn{}, up: sealer, size: c.Method().BufSize()}
	small, large := make([]byte, 1000), make([]byte, 100<<10)
	s.Write(small)
	s.Write(large)
	if n := testing.AllocsPerRun(100, func() { s.Write(small); s.Write(large) }); n != 0 {
		t.Fatalf("%.1f allocations per pair of writes", n)
	}
}

// discardConn is a net.Conn whose writes go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }
