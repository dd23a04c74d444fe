package ruleset

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"

	"github.com/gaissmai/bart"
)

// maxLens is the number of distinct IPv4 prefix lengths up to which a
// set's IPv4 prefixes are hash sets (one per length) rather than in the
// prefix table.
const maxLens = 8

// ipTable matches an address against a set of prefixes. IPv4 prefixes of
// few distinct lengths (most lists: /24 or /32 blocks, a handful of
// lengths) are one hash set of masked addresses per length, a lookup one
// probe per length, at 8 to 16 bytes a prefix; the others are in a prefix
// table (bart), a lookup a few node steps, at 20 to 30 bytes a prefix.
type ipTable struct {
	lite *bart.Lite
	v4   []lenSet
}

// lenSet is the IPv4 prefixes of one length: their addresses, masked, in
// an open-addressing table (0 marks an empty slot; 0.0.0.0 is zero).
type lenSet struct {
	mask  uint32
	zero  bool
	key   uint64 // random: so that a list cannot be made to collide
	slots []uint32
}

func (s *lenSet) hash(x uint32) uint32 {
	h := (uint64(x) ^ s.key) * 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return uint32(h ^ h>>33)
}

func (s *lenSet) has(a uint32) bool {
	a &= s.mask
	if a == 0 {
		return s.zero
	}
	m := uint32(len(s.slots) - 1)
	for i := s.hash(a) & m; ; i = (i + 1) & m {
		switch s.slots[i] {
		case a:
			return true
		case 0:
			return false
		}
	}
}

func (s *lenSet) add(a uint32) {
	if a == 0 {
		s.zero = true
		return
	}
	m := uint32(len(s.slots) - 1)
	i := s.hash(a) & m
	for s.slots[i] != 0 && s.slots[i] != a {
		i = (i + 1) & m
	}
	s.slots[i] = a
}

// Lookup reports whether a prefix of the table holds a (unmapped).
func (t *ipTable) Lookup(a netip.Addr) bool {
	if t == nil {
		return false
	}
	if a.Is4() && len(t.v4) > 0 {
		b := a.As4()
		x := binary.BigEndian.Uint32(b[:])
		for i := range t.v4 {
			if t.v4[i].has(x) {
				return true
			}
		}
	}
	return t.lite != nil && t.lite.Lookup(a)
}

// ipBuilder collects prefixes for an ipTable: IPv4 ones as address and
// length in a uint64, until Build knows how many lengths there are; IPv6
// ones straight into the prefix table.
type ipBuilder struct {
	v4   []uint64 // address<<8 | bits
	lens [33]int
	lite *bart.Lite
}

func (b *ipBuilder) add(p netip.Prefix) {
	if p.Addr().Is4() {
		a := p.Addr().As4()
		b.v4 = append(b.v4, uint64(binary.BigEndian.Uint32(a[:]))<<8|uint64(p.Bits()))
		b.lens[p.Bits()]++
		return
	}
	if b.lite == nil {
		b.lite = new(bart.Lite)
	}
	b.lite.Insert(p)
}

func (b *ipBuilder) addAll(ps []netip.Prefix, sets []srsIPSet) {
	for _, p := range ps {
		b.add(p)
	}
	for _, s := range sets {
		s.each(b.add)
	}
}

// Build is the table; nil when there are no prefixes.
func (b *ipBuilder) Build() *ipTable {
	if len(b.v4) == 0 && b.lite == nil {
		return nil
	}
	t := &ipTable{lite: b.lite}
	n := 0
	for _, c := range b.lens {
		if c > 0 {
			n++
		}
	}
	if n > maxLens {
		if t.lite == nil {
			t.lite = new(bart.Lite)
		}
		for _, x := range b.v4 {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], uint32(x>>8))
			t.lite.Insert(netip.PrefixFrom(netip.AddrFrom4(a), int(x&0xff)))
		}
		*b = ipBuilder{}
		return t
	}
	idx := [33]int{}
	for l := 32; l >= 0; l-- { // longest first: the most specific lists
		c := b.lens[l]
		if c == 0 {
			continue
		}
		size := 8 // at most half full: a miss is one or two probes
		for size < 2*c {
			size *= 2
		}
		idx[l] = len(t.v4)
		t.v4 = append(t.v4, lenSet{mask: ^uint32(0) << (32 - l), key: rand.Uint64(), slots: make([]uint32, size)}) // /0: mask 0
	}
	for _, x := range b.v4 {
		l := int(x & 0xff)
		s := &t.v4[idx[l]]
		s.add(uint32(x>>8) & s.mask)
	}
	*b = ipBuilder{}
	return t
}
