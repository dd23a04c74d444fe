package config

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"switchyard/ruleset"
	"switchyard/spec"
)

// wireguard lowers a WireGuard client: a userspace tunnel to one peer.
// address_family orders the addresses of destinations inside the tunnel;
// endpoint_address_family those of the peer's endpoint.
func (l *lowerer) wireguard(key string, f *fileOutbound, o *spec.Outbound) {
	o.AddressFamily = l.enum(key+".address_family", f.AddressFamily, defaultAddressFamily, addressFamilies)
	o.EndpointAddressFamily = l.enum(key+".endpoint_address_family", f.EndpointAddressFamily, defaultAddressFamily, addressFamilies)
	if text, ok := l.required(key+".endpoint", f.Endpoint); ok {
		if a, ok := l.serverAddr(key+".endpoint", text); ok {
			o.Endpoint = a.String()
		}
	}

	private, privateOK := l.wireGuardKey(key+".private_key", f.PrivateKey, "the private key", `make one with "wg genkey"`)
	peer, peerOK := l.wireGuardKey(key+".peer_public_key", f.PeerPublicKey, "the peer's public key", `the peer's "wg pubkey" prints it`)
	if privateOK {
		o.PrivateKey = *f.PrivateKey
	}
	if peerOK {
		o.PeerPublicKey = *f.PeerPublicKey
	}
	if privateOK && peerOK {
		// A private key of the right length is always a valid X25519 key.
		if k, err := ecdh.X25519().NewPrivateKey(private); err == nil && bytes.Equal(k.PublicKey().Bytes(), peer) {
			l.errorf(key+".peer_public_key", "this is the public key of private_key, this side's own; give the peer's")
		}
	}
	if f.PresharedKey != nil && *f.PresharedKey != "" {
		if _, ok := l.wireGuardKey(key+".preshared_key", f.PresharedKey, "the preshared key", `make one with "wg genpsk"`); ok {
			o.PresharedKey = *f.PresharedKey
		}
	}

	o.Addresses = l.tunnelAddresses(key+".addresses", f.Addresses)
	o.MTU = l.deviceMTU(key+".mtu", f.MTU, o.Addresses, defaultWireGuardMTU, "tunnel")
	if f.Keepalive != nil && *f.Keepalive != "" {
		o.Keepalive = l.keepalive(key+".keepalive", *f.Keepalive)
	}
	o.AllowedIPs = l.allowedIPs(key+".allowed_ips", f.AllowedIPs)
	o.Reserved = l.reserved(key+".reserved", f.Reserved)
}

// wireGuardKey decodes a required WireGuard key: standard padded base64 of
// 32 bytes. Keys are secrets (a public key less so, but it is checked
// beside them): problems say which key is wrong, never what it is.
func (l *lowerer) wireGuardKey(key string, v *string, which, hint string) ([]byte, bool) {
	text, ok := l.required(key, v)
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(text)
	switch {
	case err != nil || strings.ContainsAny(text, "\r\n"):
		l.errorf(key, "%s is not base64 (standard alphabet, padded); %s", which, hint)
		return nil, false
	case len(b) != wireGuardKeySize:
		l.errorf(key, "%s decodes to %d bytes; a WireGuard key is %d", which, len(b), wireGuardKeySize)
		return nil, false
	}
	return b, true
}

// tunnelAddresses lowers the tunnel-local addresses. Each keeps its own
// address inside its prefix ("10.7.0.2/24" is the address 10.7.0.2 on a
// /24); a bare address is a /32 or a /128.
func (l *lowerer) tunnelAddresses(key string, vs []string) []netip.Prefix {
	if len(vs) == 0 {
		l.errorf(key, "wireguard needs at least one tunnel-local address")
		return nil
	}
	var out []netip.Prefix
	eachString(key, vs, func(ekey, v string) {
		p, ok := parseTunnelAddress(v)
		switch {
		case !ok:
			l.errorf(ekey, "%q is not an IP address or an address with a prefix length (such as \"10.7.0.2/32\", \"fd00:7::2/128\")", v)
		case p.Addr().IsUnspecified() || p.Addr().IsMulticast():
			l.errorf(ekey, "%s cannot be a tunnel-local address", p.Addr())
		case slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Addr() == p.Addr() }):
			l.errorf(ekey, "duplicate address %s", p.Addr())
		default:
			out = append(out, p)
		}
	})
	return out
}

// parseTunnelAddress parses an address with an optional prefix length,
// unmasked. An IPv4-mapped IPv6 address becomes its IPv4 form.
func parseTunnelAddress(s string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, false
		}
	} else {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(ip, ip.BitLen())
	}
	if ip := p.Addr(); ip.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(ip.Unmap(), p.Bits()-96)
	}
	return p, true
}

// deviceMTU lowers the MTU of a tunnel or a TUN device (what names it in
// errors): 576..65535, and at least 1280 when it has an IPv6 address; def
// when unset or refused.
func (l *lowerer) deviceMTU(key string, v *int64, addrs []netip.Prefix, def int, what string) int {
	if v == nil {
		return def
	}
	n := *v
	if n < minWireGuardMTU || n > maxWireGuardMTU {
		l.errorf(key, "%d is out of range %d..%d", n, minWireGuardMTU, maxWireGuardMTU)
		return def
	}
	if n < minIPv6MTU {
		for _, p := range addrs {
			if p.Addr().Is6() {
				l.errorf(key, "the %s has an IPv6 address (%s): IPv6 needs an MTU of at least %d (RFC 8200)", what, p.Addr(), minIPv6MTU)
				return def
			}
		}
	}
	return int(n)
}

// keepalive lowers a persistent keepalive interval: whole seconds, up to
// what the protocol counts.
func (l *lowerer) keepalive(key, text string) time.Duration {
	d := l.positiveDuration(key, text, `"" for none`)
	if d == 0 {
		return 0
	}
	if d%time.Second != 0 || d > maxWireGuardKeepalive {
		l.errorf(key, "%q: a WireGuard keepalive is whole seconds from 1s to %ds", text, maxWireGuardKeepalive/time.Second)
		return 0
	}
	return d
}

// allowedIPs lowers the destinations the tunnel carries; everything when the
// key is left out.
func (l *lowerer) allowedIPs(key string, vs []string) []netip.Prefix {
	if vs == nil {
		return slices.Clone(defaultAllowedIPs)
	}
	if len(vs) == 0 {
		l.errorf(key, "no destination would go through the tunnel; leave allowed_ips out for everything")
		return nil
	}
	var out []netip.Prefix
	eachString(key, vs, func(ekey, v string) {
		p, ok := ruleset.ParsePrefix(v)
		switch {
		case !ok:
			l.errorf(ekey, "%q is not an IP prefix (such as \"10.0.0.0/8\", \"fd00::/8\") or an IP address", v)
		case slices.Contains(out, p):
			l.errorf(ekey, "duplicate prefix %s", p)
		default:
			out = append(out, p)
		}
	})
	return out
}

// reserved lowers the 3 reserved header bytes; nil when the key is left
// out.
func (l *lowerer) reserved(key string, vs []int64) []byte {
	if vs == nil {
		return nil
	}
	if len(vs) != wireGuardReservedSize {
		l.errorf(key, "takes exactly %d bytes; this is %d", wireGuardReservedSize, len(vs))
		return nil
	}
	out := make([]byte, 0, wireGuardReservedSize)
	for i, v := range vs {
		if v < 0 || v > 255 {
			l.errorf(fmt.Sprintf("%s[%d]", key, i), "%d is out of range 0..255", v)
			continue
		}
		out = append(out, byte(v))
	}
	if len(out) != wireGuardReservedSize {
		return nil
	}
	return out
}
