package vless

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/internal/testcert"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
)

// The Vision flow builds over TLS (or REALITY) on the tcp transport, and
// nowhere else; its UDP is XUDP, and UDP to port 443 is refused before any
// socket opens, as Xray's client refuses it.
func TestVisionNeedsTLSOverTCP(t *testing.T) {
	base := spec.Outbound{Tag: "v", Type: "vless", Server: "127.0.0.1:1", UUID: testUUID, Flow: "xtls-rprx-vision", TLS: &spec.TLS{ServerName: "v.test"}}
	o, err := New(base, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if !o.vision || o.xudp == nil || !o.CarriesUDP() {
		t.Fatal("vision without XUDP")
	}
	if _, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("quic.test", 443)}); !errors.Is(err, ErrVisionUDP443) {
		t.Fatalf("UDP/443: %v", err)
	}
	for name, change := range map[string]func(*spec.Outbound){
		"no tls":   func(o *spec.Outbound) { o.TLS = nil },
		"ws":       func(o *spec.Outbound) { o.Transport.Type = "ws" },
		"grpc":     func(o *spec.Outbound) { o.Transport = spec.Transport{Type: "grpc", ServiceName: "s"} },
		"bad flow": func(o *spec.Outbound) { o.Flow = "xtls-rprx-direct" },
	} {
		o := base
		change(&o)
		if b, err := New(o, proxytest.Deps(nil)); err == nil {
			b.Close()
			t.Errorf("%s: built", name)
		}
	}
}

// visionServer is a VLESS server with the Vision flow over TLS 1.3 for one
// flow: it checks the request, then serve writes its answer (on tc, or on
// raw beneath it); it then reads raw to its end. It returns the flow
// dialed through a vless outbound and what the server ended with.
func visionServer(t *testing.T, serve func(tc *tls.Conn, raw net.Conn, id *codec.UUID) error) (net.Conn, <-chan error) {
	t.Helper()
	cert := testcert.New(t, "v.test")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	id, _ := codec.ParseUUID(testUUID)
	served := make(chan error, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer raw.Close()
		tc := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS13})
		if err := tc.Handshake(); err != nil {
			served <- err
			return
		}
		// The request: version, UUID, the flow's addons, the command
		// and the address; then the padding-only block.
		head := make([]byte, 1+16+1+18+1)
		if _, err := io.ReadFull(tc, head); err != nil {
			served <- err
			return
		}
		if head[17] != 18 || string(head[20:36]) != codec.FlowVision || head[36] != codec.CmdTCP {
			served <- fmt.Errorf("request %x", head)
			return
		}
		if err := serve(tc, raw, &id); err != nil {
			served <- err
			return
		}
		io.Copy(io.Discard, raw)
		served <- nil
	}()
	o, err := New(spec.Outbound{Tag: "v", Type: "vless", Server: ln.Addr().String(), UUID: testUUID, Flow: codec.FlowVision,
		TLS: &spec.TLS{ServerName: "v.test", CAFile: cert.CertFile}}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("a.test", 443)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	return c, served
}

// A server's Direct block steps the reads down to the TCP conn under the
// outer TLS: the content before it, then the raw bytes the server wrote on
// the TCP conn right after (already read with the record, or not), come
// out in order, and from then on the stream hands its TCP conn to a relay.
func TestVisionReadsStepDownOnDirect(t *testing.T) {
	c, served := visionServer(t, func(tc *tls.Conn, raw net.Conn, id *codec.UUID) error {
		out := []byte{0, 0}
		out = codec.AppendBlock(out, id, []byte("hello "), codec.CommandContinue, true)
		out = codec.AppendBlock(out, nil, []byte("world "), codec.CommandDirect, false)
		if _, err := tc.Write(out); err != nil {
			return err
		}
		_, err := raw.Write([]byte("raw bytes"))
		return err
	})
	if netx.Settling(c, true) == false {
		t.Fatal("reads pass through before the server's Direct")
	}
	want := "hello world raw bytes"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("read %q: %v", got, err)
	}
	if inner, _ := netx.Unwrap(c, true); !isTCP(inner) {
		t.Fatalf("after Direct, reads unwrap to %T", inner)
	}
	if !netx.Settling(c, false) {
		t.Fatal("writes stepped down though the client sent no Direct")
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// The padded records already received come out of one Read, up to the one
// whose block ends the padding: a relay writes them at once. What follows
// the Direct block comes from the TCP conn, after them.
func TestVisionReadTakesTheRecordsReceived(t *testing.T) {
	pieces := []string{"hello ", "first ", "second ", "third ", "end "}
	c, served := visionServer(t, func(tc *tls.Conn, raw net.Conn, id *codec.UUID) error {
		// Each Write is a record of its own.
		writes := [][]byte{codec.AppendBlock([]byte{0, 0}, id, []byte(pieces[0]), codec.CommandContinue, true)}
		for _, p := range pieces[1 : len(pieces)-1] {
			writes = append(writes, codec.AppendBlock(nil, nil, []byte(p), codec.CommandContinue, false))
		}
		writes = append(writes, codec.AppendBlock(nil, nil, []byte(pieces[len(pieces)-1]), codec.CommandDirect, false))
		for _, w := range writes {
			if _, err := tc.Write(w); err != nil {
				return err
			}
		}
		_, err := raw.Write([]byte("raw bytes"))
		return err
	})
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // every record is received
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	want := ""
	for _, p := range pieces {
		want += p
	}
	if err != nil || string(first)+string(buf[:n]) != want {
		t.Fatalf("one read after the records came: %q, %v; want %q", string(first)+string(buf[:n]), err, want)
	}
	rest := make([]byte, len("raw bytes"))
	if _, err := io.ReadFull(c, rest); err != nil || string(rest) != "raw bytes" {
		t.Fatalf("after Direct: %q, %v", rest, err)
	}
	if inner, _ := netx.Unwrap(c, true); !isTCP(inner) {
		t.Fatalf("after Direct, reads unwrap to %T", inner)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
