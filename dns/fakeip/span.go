package fakeip

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
)

// span is one range of fake addresses. Index i stands for the address i+1
// above the range's first: the first address (the network's) and the
// last (IPv4's broadcast) are never handed out, since stacks treat them
// specially.
type span struct {
	prefix     netip.Prefix // masked; invalid for no range
	hi, lo     uint64       // the first address, as a 128-bit number
	usable     int          // addresses that can be handed out, at most MaxInt32
	ipv4, used bool
}

func newSpan(p netip.Prefix, family string) (span, error) {
	if !p.IsValid() {
		return span{}, nil
	}
	p = p.Masked()
	ipv4 := p.Addr().Is4()
	if (family == "IPv4") != ipv4 {
		return span{}, fmt.Errorf("fake ip: %s range %s is not an %s prefix", family, p, family)
	}
	bits := 128
	if ipv4 {
		bits = 32
	}
	host := bits - p.Bits()
	usable := math.MaxInt32
	if host < 31 {
		usable = min(usable, 1<<host-2)
	}
	if usable < 1 {
		return span{}, fmt.Errorf("fake ip: %s range %s has no address to hand out (its first and last are kept)", family, p)
	}
	s := span{prefix: p, usable: usable, ipv4: ipv4, used: true}
	s.hi, s.lo = split(p.Addr())
	return s, nil
}

// split returns a as a 128-bit number (an IPv4 address in its IPv4-mapped
// form).
func split(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// addr returns the address of index i; an invalid one without a range.
func (s *span) addr(i int32) netip.Addr {
	if !s.used {
		return netip.Addr{}
	}
	lo := s.lo + uint64(i) + 1
	hi := s.hi
	if lo < s.lo {
		hi++
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	a := netip.AddrFrom16(b)
	if s.ipv4 {
		return a.Unmap()
	}
	return a
}

// index returns the index of a, if a is an address of the range that can
// be handed out.
func (s *span) index(a netip.Addr) (int32, bool) {
	if !s.used {
		return 0, false
	}
	a = a.Unmap().WithZone("")
	if !s.prefix.Contains(a) {
		return 0, false
	}
	hi, lo := split(a)
	dlo := lo - s.lo
	dhi := hi - s.hi
	if lo < s.lo {
		dhi--
	}
	if dhi != 0 || dlo == 0 || dlo > uint64(s.usable) {
		return 0, false
	}
	return int32(dlo - 1), true
}
