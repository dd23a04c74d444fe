package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// socks5FieldMax is the longest username or password SOCKS5 can carry
// (RFC 1929: one length byte).
const socks5FieldMax = 255

// inbounds lowers [[inbounds]]. A spec is only returned when there is no
// problem at all, so an inbound with a problem is simply left incomplete.
func (l *lowerer) inbounds(fs []fileInbound) []spec.Inbound {
	var out []spec.Inbound
	listens := map[netip.AddrPort]string{} // listen address -> inbound that has it
	devices := map[string]string{}         // tun device name -> inbound that has it
	for i := range fs {
		f := &fs[i]
		key := fmt.Sprintf("inbounds[%d]", i)
		var in spec.Inbound

		if tag, ok := l.required(key+".tag", f.Tag); ok {
			if first, dup := l.inboundTags[tag]; dup {
				l.errorf(key+".tag", "duplicate inbound tag %q (first declared on line %s)", tag, lineOf(first))
			} else {
				l.inboundTags[tag] = key + ".tag"
			}
			in.Tag = tag
		}

		// Without a known type nothing else can be judged.
		typ, ok := l.required(key+".type", f.Type)
		if !ok {
			continue
		}
		if !slices.Contains(inboundTypes, typ) {
			l.errorf(key+".type", "unknown inbound type %q", typ)
			l.refused = append(l.refused, key)
			continue
		}
		in.Type = typ
		if typ == "tun" {
			l.tunInbound(key, f, &in, devices)
			out = append(out, in)
			continue
		}
		l.noTUNKeys(key, f)

		if text, ok := l.required(key+".listen", f.Listen); ok {
			if ap, ok := l.listenAddr(key+".listen", text); ok {
				in.Listen = ap
				if first, dup := listens[ap]; dup && ap.Port() != 0 {
					l.errorf(key+".listen", "%s is already the listen address of %s", ap, first)
				}
				listens[ap] = key
			}
		}

		in.UDP = defaultInboundUDP(typ)
		if f.UDP != nil {
			if *f.UDP && typ == "http" {
				l.errorf(key+".udp", `an http inbound has no UDP (use type "mixed" for SOCKS5 UDP on the same port)`)
			}
			in.UDP = *f.UDP
		}
		in.MaxUDPAssociations = l.maxUDPAssociations(key, typ, f.MaxUDPAssociations)
		in.Users = l.users(key, typ, f.Users)
		in.Sniff = f.Sniff
		if f.SOCKS4 && typ == "http" {
			l.errorf(key+".socks4", `an http inbound has no SOCKS4 (use type "mixed" for SOCKS4 on the same port)`)
		}
		in.SOCKS4 = f.SOCKS4
		in.HandshakeTimeout, in.MaxHandshakes = l.handshakes(key, f)
		out = append(out, in)
	}
	return out
}

// handshakes lowers the bounds of an inbound's handshakes.
func (l *lowerer) handshakes(key string, f *fileInbound) (time.Duration, int) {
	timeout, limit := defaultHandshakeTimeout, defaultMaxHandshakes
	if f.HandshakeTimeout != nil {
		if d := l.positiveDuration(key+".handshake_timeout", *f.HandshakeTimeout, ""); d > 0 {
			timeout = d
		}
	}
	if n := f.MaxHandshakes; n != nil {
		if *n < 1 || *n > maxMaxHandshakes {
			l.errorf(key+".max_handshakes", "%d is out of range 1..%d", *n, maxMaxHandshakes)
		} else {
			limit = int(*n)
		}
	}
	return timeout, limit
}

// maxUDPAssociations lowers max_udp_associations: the default on socks and
// mixed inbounds, refused on http (which has no UDP).
func (l *lowerer) maxUDPAssociations(key, typ string, n *int64) int {
	if typ == "http" {
		if n != nil {
			l.errorf(key+".max_udp_associations", `an http inbound has no UDP (use type "mixed" for SOCKS5 UDP on the same port)`)
		}
		return 0
	}
	if n == nil {
		return defaultMaxUDPAssociations
	}
	if *n < 1 || *n > math.MaxInt32 {
		l.errorf(key+".max_udp_associations", "%d is out of range 1..%d", *n, math.MaxInt32)
		return defaultMaxUDPAssociations
	}
	return int(*n)
}

// listenAddr parses an inbound's listen address: an IP literal and a port.
func (l *lowerer) listenAddr(key, text string) (netip.AddrPort, bool) {
	a, err := netx.ParseAddr(text)
	if err != nil {
		l.errorf(key, "%v", err)
		return netip.AddrPort{}, false
	}
	ap, ok := a.AddrPort()
	if !ok {
		l.errorf(key, "%q: the host must be an IP address (an inbound listens on an address, not a name)", text)
		return netip.AddrPort{}, false
	}
	return ap, true
}

func (l *lowerer) users(key, typ string, fs []fileUser) []spec.User {
	var out []spec.User
	seen := map[string]bool{}
	for j, u := range fs {
		ukey := fmt.Sprintf("%s.users[%d]", key, j)
		name, ok := l.required(ukey+".username", u.Username)
		if !ok {
			continue
		}
		if u.Password == nil {
			l.errorf(ukey+".password", "required key is missing")
			continue
		}
		if seen[name] {
			l.errorf(ukey+".username", "duplicate username %q", name)
		}
		seen[name] = true
		if typ != "http" && (len(name) > socks5FieldMax || len(*u.Password) > socks5FieldMax) {
			l.errorf(ukey, "SOCKS5 carries at most %d bytes of username and of password", socks5FieldMax)
		}
		out = append(out, l.userRates(ukey, spec.User{Username: name, Password: *u.Password}, u))
	}
	return out
}
