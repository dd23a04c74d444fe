// Package build turns one spec.Outbound into an outbound.Outbound: one switch
// over the closed set of protocols. Construction opens no socket.
package build

import (
	"fmt"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/block"
	"switchyard/outbound/direct"
	"switchyard/outbound/http"
	"switchyard/outbound/hysteria2"
	"switchyard/outbound/shadowsocks"
	"switchyard/outbound/socks"
	"switchyard/outbound/trojan"
	"switchyard/outbound/vless"
	"switchyard/outbound/vmess"
	"switchyard/outbound/wireguard"
	"switchyard/spec"
)

// Outbound builds o with deps.
func Outbound(o spec.Outbound, deps outbound.Deps) (outbound.Outbound, error) {
	var out outbound.Outbound
	switch o.Type {
	case "direct":
		s, err := netx.ParseStrategy(o.AddressFamily)
		if err != nil {
			return nil, err
		}
		out = direct.New(s, deps)
	case "block":
		out = block.New()
	case "dns":
		if deps.DNS == nil {
			return nil, fmt.Errorf("a dns outbound needs a [dns] table")
		}
		out = deps.DNS
	case "trojan":
		t, err := trojan.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = t
	case "vless":
		v, err := vless.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = v
	case "vmess":
		v, err := vmess.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = v
	case "socks":
		s, err := socks.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = s
	case "http":
		h, err := http.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = h
	case "hysteria2":
		h, err := hysteria2.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = h
	case "shadowsocks":
		s, err := shadowsocks.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = s
	case "wireguard":
		w, err := wireguard.New(o, deps)
		if err != nil {
			return nil, err
		}
		out = w
	default:
		return nil, fmt.Errorf("unknown outbound type %q", o.Type)
	}
	if !o.UDP {
		out = refuseUDP(out, o.Tag)
	}
	return out, nil
}
