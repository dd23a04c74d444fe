package build

import (
	"io"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/direct"
	"switchyard/spec"
)

// purging is an outbound that counts its purges and reports a family.
type purging struct {
	outbound.Outbound
	purges int
}

func (p *purging) Purge()                            { p.purges++ }
func (p *purging) ServerFamily() (netx.Family, bool) { return netx.V6, true }

type probing struct{ *purging }

func (probing) ProbeTarget() netx.Addr {
	return netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 1}
}

type familyReporter interface {
	ServerFamily() (netx.Family, bool)
}

// udp = false keeps what the outbound offers the supervisor: Purge passes
// on exactly when the outbound has it, with or without ProbeTarget, and
// so does the server's address family.
func TestUDPFalseForwardsPurgeAndServerFamily(t *testing.T) {
	plain := direct.New(netx.Auto, deps())
	if _, ok := refuseUDP(plain, "d").(outbound.Purger); ok {
		t.Fatal("udp = false made a purger of an outbound without Purge")
	}
	if f, ok := refuseUDP(plain, "d").(familyReporter).ServerFamily(); ok {
		t.Fatalf("a family (%v) from an outbound that reports none", f)
	}
	p := &purging{Outbound: plain}
	for _, out := range []outbound.Outbound{p, probing{p}} {
		w := refuseUDP(out, "x")
		if _, ok := w.(outbound.Prober); ok != (out != outbound.Outbound(p)) {
			t.Fatalf("%T: Prober %v", w, ok)
		}
		pg, ok := w.(outbound.Purger)
		if !ok {
			t.Fatalf("%T does not pass Purge on", w)
		}
		before := p.purges
		pg.Purge()
		if p.purges != before+1 {
			t.Fatalf("%T: Purge did not reach the outbound", w)
		}
		if f, ok := w.(familyReporter).ServerFamily(); !ok || f != netx.V6 {
			t.Fatalf("%T: family %v, %v", w, f, ok)
		}
		if outbound.CarriesUDP(w) {
			t.Fatalf("%T carries UDP", w)
		}
	}
}

// The outbounds that keep connections for reuse are purgers as built,
// with udp = false too; those that keep none are not.
func TestBuiltPurgers(t *testing.T) {
	const (
		uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
		key  = "YNXtAzepDqRv9H52osJVDQnznT5AL11eVMG+Ox4TYSg="
	)
	for _, tc := range []struct {
		o    spec.Outbound
		want bool
	}{
		{spec.Outbound{Type: "direct"}, false},
		{spec.Outbound{Type: "block"}, false},
		{spec.Outbound{Type: "socks", Server: "127.0.0.1:1080"}, true},
		{spec.Outbound{Type: "http", Server: "127.0.0.1:3128"}, true},
		{spec.Outbound{Type: "shadowsocks", Server: "127.0.0.1:8388", Method: "aes-128-gcm", Password: "pw"}, true},
		{spec.Outbound{Type: "trojan", Server: "127.0.0.1:443", Password: "pw", TLS: &spec.TLS{ServerName: "t.test"}}, true},
		{spec.Outbound{Type: "vless", Server: "127.0.0.1:443", UUID: uuid, Transport: spec.Transport{Type: "grpc"}}, true},
		{spec.Outbound{Type: "vmess", Server: "127.0.0.1:443", UUID: uuid, Security: "auto", Transport: spec.Transport{Type: "grpc"}}, true},
		{spec.Outbound{Type: "hysteria2", Server: "127.0.0.1:443", Password: "pw"}, true},
		{spec.Outbound{Type: "wireguard", Endpoint: "127.0.0.1:51820", PrivateKey: key, PeerPublicKey: key,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.7.0.2/32")}}, true},
	} {
		for _, udp := range []bool{true, false} {
			o := tc.o
			o.Tag, o.UDP, o.AddressFamily = "x", udp, "auto"
			out, err := Outbound(o, deps())
			if err != nil {
				t.Fatal(err)
			}
			p, ok := out.(outbound.Purger)
			if ok != tc.want {
				t.Errorf("%s udp=%v: Purger %v, want %v", o.Type, udp, ok, tc.want)
			}
			if ok {
				p.Purge() // nothing up: nothing to let go, nothing opened
			}
			if c, ok := out.(io.Closer); ok {
				c.Close()
			}
		}
	}
}
