package build

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

func deps() outbound.Deps {
	return outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 0), Destinations: netx.SystemResolver{}, Logger: slog.New(slog.DiscardHandler)}
}

func TestBuildSwitch(t *testing.T) {
	if _, err := Outbound(spec.Outbound{Tag: "x", Type: "tuic"}, deps()); err == nil || err.Error() != `unknown outbound type "tuic"` {
		t.Fatalf("tuic: %v", err)
	}
	if _, err := Outbound(spec.Outbound{Tag: "d", Type: "direct", AddressFamily: "sideways"}, deps()); err == nil {
		t.Fatal("bad address family built")
	}
	o, err := Outbound(spec.Outbound{Tag: "d", Type: "direct", UDP: false}, deps())
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if !errors.Is(err, outbound.ErrNoUDP) {
		t.Fatalf("udp = false: %v", err)
	}
}

func TestUDPFalseKeepsProbeAndClose(t *testing.T) {
	o, err := Outbound(spec.Outbound{Tag: "s", Type: "socks", Server: "127.0.0.1:1080", AddressFamily: "auto", UDP: false}, deps())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := o.(outbound.Prober)
	if !ok || p.ProbeTarget().String() != "127.0.0.1:1080" {
		t.Fatal("udp = false hid the probe target")
	}
	if _, ok := o.(interface{ Close() error }); !ok {
		t.Fatal("udp = false hid Close")
	}
	d, _ := Outbound(spec.Outbound{Tag: "d", Type: "direct", UDP: false}, deps())
	if _, ok := d.(outbound.Prober); ok {
		t.Fatal("a direct outbound became probeable")
	}
}

// udp = false keeps what the outbound keeps warm reachable.
func TestUDPFalseKeepsTheWarmer(t *testing.T) {
	o, err := Outbound(spec.Outbound{Tag: "t", Type: "trojan", Server: "127.0.0.1:443", Password: "p", AddressFamily: "auto",
		TLS: &spec.TLS{ServerName: "t.test"}, UDP: false}, deps())
	if err != nil {
		t.Fatal(err)
	}
	w := outbound.WarmerOf(o)
	if w == nil || w.Warmth().Kind != outbound.WarmPool {
		t.Fatalf("udp = false hid the warmer: %v", w)
	}
	if outbound.CarriesUDP(o) {
		t.Fatal("udp = false carries UDP")
	}
	d, _ := Outbound(spec.Outbound{Tag: "d", Type: "direct", UDP: false}, deps())
	if outbound.WarmerOf(d) != nil {
		t.Fatal("a direct outbound warms something")
	}
}
