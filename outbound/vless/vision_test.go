package vless

import (
	"context"
	"errors"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
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
