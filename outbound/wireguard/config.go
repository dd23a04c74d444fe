package wireguard

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// Defaults and bounds of the configuration.
const (
	defaultMTU = 1408
	minMTU     = 576
	maxMTU     = 65535
)

// settings is an outbound's configuration, decoded once when it is built.
type settings struct {
	endpoint         netx.Addr
	endpointStrategy netx.Strategy
	strategy         netx.Strategy // destinations inside the tunnel
	local            []netip.Addr  // tunnel-local addresses
	families         families      // of the tunnel-local addresses
	mtu              int
	reserved         [3]byte
	hasReserved      bool
	// device is the device's configuration in the UAPI text form, up to
	// and including the peer's public key; peer is the rest of the peer's
	// lines. The endpoint line goes between them once it is resolved.
	device, peer string
}

// families says which address families the tunnel-local addresses give
// the tunnel.
type families struct{ v4, v6 bool }

func (f families) allows(ip netip.Addr) bool {
	if ip.Unmap().Is4() {
		return f.v4
	}
	return f.v6
}

// suffix names what the local addresses support, for an error that they
// ruled every candidate out.
func (f families) suffix() string {
	switch {
	case f.v4 && !f.v6:
		return " (local address supports IPv4 only)"
	case f.v6 && !f.v4:
		return " (local address supports IPv6 only)"
	}
	return ""
}

// newSettings decodes and checks o; every error here is a build error.
func newSettings(o spec.Outbound) (*settings, error) {
	s := &settings{mtu: o.MTU}
	var err error
	if s.endpoint, err = netx.ParseAddr(o.Endpoint); err != nil {
		return nil, fmt.Errorf("wireguard: endpoint: %w", err)
	}
	if s.endpointStrategy, err = netx.ParseStrategy(o.EndpointAddressFamily); err != nil {
		return nil, fmt.Errorf("wireguard: endpoint_address_family: %w", err)
	}
	if s.strategy, err = netx.ParseStrategy(o.AddressFamily); err != nil {
		return nil, fmt.Errorf("wireguard: address_family: %w", err)
	}
	private, err := decodeKey("private_key", o.PrivateKey)
	if err != nil {
		return nil, err
	}
	public, err := decodeKey("peer_public_key", o.PeerPublicKey)
	if err != nil {
		return nil, err
	}
	var preshared string
	if o.PresharedKey != "" {
		if preshared, err = decodeKey("preshared_key", o.PresharedKey); err != nil {
			return nil, err
		}
	}
	if s.mtu == 0 {
		s.mtu = defaultMTU
	}
	if s.mtu < minMTU || s.mtu > maxMTU {
		return nil, fmt.Errorf("wireguard: mtu %d is out of range (%d to %d)", s.mtu, minMTU, maxMTU)
	}
	switch len(o.Reserved) {
	case 0:
	case 3:
		copy(s.reserved[:], o.Reserved)
		s.hasReserved = true
	default:
		return nil, fmt.Errorf("wireguard: reserved must be empty or 3 bytes, got %d", len(o.Reserved))
	}
	if o.Keepalive < 0 {
		return nil, fmt.Errorf("wireguard: keepalive must not be negative")
	}
	keepalive := int64(math.Ceil(o.Keepalive.Seconds()))
	if keepalive > math.MaxUint16 {
		return nil, fmt.Errorf("wireguard: keepalive %s is longer than %s", o.Keepalive, time.Duration(math.MaxUint16)*time.Second)
	}
	for _, p := range o.Addresses {
		ip := p.Addr().Unmap()
		if !ip.IsValid() {
			return nil, fmt.Errorf("wireguard: address %s is not an IP prefix", p)
		}
		s.local = append(s.local, ip)
		s.families.v4 = s.families.v4 || ip.Is4()
		s.families.v6 = s.families.v6 || ip.Is6()
	}
	allowed := o.AllowedIPs
	if len(allowed) == 0 {
		allowed = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}

	var b strings.Builder
	b.WriteString("private_key=" + private + "\nreplace_peers=true\npublic_key=" + public + "\n")
	s.device = b.String()
	b.Reset()
	if preshared != "" {
		b.WriteString("preshared_key=" + preshared + "\n")
	}
	b.WriteString("persistent_keepalive_interval=" + strconv.FormatInt(keepalive, 10) + "\n")
	b.WriteString("replace_allowed_ips=true\n")
	for _, p := range allowed {
		if !p.IsValid() {
			return nil, fmt.Errorf("wireguard: allowed_ips: %s is not a prefix", p)
		}
		b.WriteString("allowed_ip=" + p.Masked().String() + "\n")
	}
	s.peer = b.String()
	return s, nil
}

// uapi is the device's whole configuration with the resolved endpoint.
func (s *settings) uapi(endpoint netip.AddrPort) string {
	return s.device + "endpoint=" + endpoint.String() + "\n" + s.peer
}

// decodeKey decodes a base64 key of 32 bytes into the hex form of the UAPI.
func decodeKey(name, text string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return "", fmt.Errorf("wireguard: %s is not base64: %w", name, err)
	}
	if len(raw) != 32 {
		return "", fmt.Errorf("wireguard: %s must be 32 bytes, got %d", name, len(raw))
	}
	return hex.EncodeToString(raw), nil
}
