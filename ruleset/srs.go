package ruleset

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"regexp"
	"strings"

	"switchyard/netx"
)

// The sing-box binary rule set (.srs): "SRS", a version byte (1..5 as
// sing-box 1.14 writes), then a zlib stream of a uvarint rule count and
// the rules. A default rule is a 0 byte, then items (an item-type byte and
// its value) up to the final item 0xFF and its invert byte. A logical rule
// is a 1 byte, its mode (0 and, 1 or), a uvarint count of rules (default
// or logical, nested up to 100 deep) and its invert byte. Strings and
// lists are uvarint-length-prefixed; ports are big-endian uint16; domains
// are a succinct (LOUDS) trie of reversed names; IP sets are address
// ranges. The domain tries and IP sets are checked as they are read and
// compiled from the inflated bytes, with no list of entries between.

const srsVersionMax = 5

// srsMaxInflated bounds the decompressed rules.
const srsMaxInflated = 8 * MaxFileSize

const (
	srsNetwork       = 1
	srsDomain        = 2
	srsDomainKeyword = 3
	srsDomainRegex   = 4
	srsSourceIPCIDR  = 5
	srsIPCIDR        = 6
	srsSourcePort    = 7
	srsSourcePortRng = 8
	srsPort          = 9
	srsPortRange     = 10
	srsFinal         = 0xFF
	srsPrefixLabel   = '\r'
	srsRootLabel     = '\n'
)

var srsItemNames = map[byte]string{
	0: "query_type", 11: "process_name", 12: "process_path", 13: "package_name", 14: "wifi_ssid",
	15: "wifi_bssid", 16: "adguard_domain", 17: "process_path_regex", 18: "network_type",
	19: "network_is_expensive", 20: "network_is_constrained", 21: "network_interface_address",
	22: "default_interface_address", 23: "package_name_regex",
}

type offsetError struct {
	off int64
	msg string
}

func (e *offsetError) Error() string { return fmt.Sprintf("at byte %d: %s", e.off, e.msg) }

type srsReader struct {
	b    []byte
	pos  int
	rule int // the top-level rule being read
	// What the rules read so far compile to, bounded: a small file must
	// not expand into more memory than a large list would take.
	keyBytes, prefixes int
	scratch            []netip.Prefix
}

// The bounds of what a .srs compiles to: the names' bytes (a trie shares
// what its names have in common, the table does not) and the prefixes
// its IP ranges split into.
const (
	srsMaxKeyBytes = MaxFileSize
	srsMaxPrefixes = 8 << 20
)

func (r *srsReader) fail(format string, args ...any) error {
	where := "in the decompressed rules: "
	if r.rule >= 0 {
		where = fmt.Sprintf("in the decompressed rules, rule %d: ", r.rule)
	}
	return &offsetError{off: int64(r.pos), msg: where + fmt.Sprintf(format, args...)}
}

func (r *srsReader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.fail("unexpected end of the rules")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *srsReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		return 0, r.fail("bad length")
	}
	r.pos += n
	return v, nil
}

// count reads a length of elements of size bytes each, refusing one the
// rest of the data cannot hold.
func (r *srsReader) count(size int) (int, error) {
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)-r.pos)/uint64(size) {
		return 0, r.fail("a length of %d is beyond the end of the rules", n)
	}
	return int(n), nil
}

func (r *srsReader) bytes(n int) ([]byte, error) {
	if n > len(r.b)-r.pos {
		return nil, r.fail("unexpected end of the rules")
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *srsReader) strings() ([]string, error) {
	n, err := r.count(1)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for range n {
		l, err := r.count(1)
		if err != nil {
			return nil, err
		}
		b, err := r.bytes(l)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

func (r *srsReader) uint16s() ([]uint16, error) {
	n, err := r.count(2)
	if err != nil {
		return nil, err
	}
	out := make([]uint16, n)
	for i := range out {
		b, _ := r.bytes(2)
		out[i] = binary.BigEndian.Uint16(b)
	}
	return out, nil
}

func (r *srsReader) uint64s() ([]uint64, error) {
	n, err := r.count(8)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		b, _ := r.bytes(8)
		out[i] = binary.BigEndian.Uint64(b)
	}
	return out, nil
}

func parseSRS(data []byte, c *compiler) error {
	if len(data) < 4 || string(data[:3]) != "SRS" {
		return &offsetError{0, "not a sing-box binary rule set (no \"SRS\" magic)"}
	}
	if v := data[3]; v < 1 || v > srsVersionMax {
		return &offsetError{3, fmt.Sprintf("rule-set version %d is not one of 1..%d", v, srsVersionMax)}
	}
	zr, err := zlib.NewReader(bytes.NewReader(data[4:]))
	if err != nil {
		return &offsetError{4, "the rules are not a zlib stream: " + err.Error()}
	}
	// Most rule sets inflate to 2 to 8 times their size.
	var buf bytes.Buffer
	buf.Grow(min(4*len(data), srsMaxInflated))
	if _, err := buf.ReadFrom(io.LimitReader(zr, srsMaxInflated+1)); err != nil {
		return &offsetError{4, "the rules' zlib stream: " + err.Error()}
	}
	if buf.Len() > srsMaxInflated {
		return &offsetError{4, fmt.Sprintf("the rules inflate to more than %d MiB", srsMaxInflated>>20)}
	}
	r := &srsReader{b: buf.Bytes(), rule: -1}
	n, err := r.count(1)
	if err != nil {
		return err
	}
	for i := range n {
		r.rule = i
		h, err := r.readRule(0)
		if err != nil {
			return err
		}
		c.add(&h)
	}
	if r.rule = -1; r.pos != len(r.b) {
		return r.fail("%d bytes after the last rule", len(r.b)-r.pos)
	}
	return nil
}

// readRule reads a default or logical rule at nesting depth.
func (r *srsReader) readRule(depth int) (headless, error) {
	if depth > maxDepth {
		return headless{}, r.fail("logical rules nested more than %d deep", maxDepth)
	}
	typ, err := r.byte()
	if err != nil {
		return headless{}, err
	}
	switch typ {
	case 0:
		return r.defaultRule()
	case 1:
	default:
		return headless{}, r.fail("unknown rule type %d", typ)
	}
	mode, err := r.byte()
	if err != nil {
		return headless{}, err
	}
	if mode > 1 {
		return headless{}, r.fail("logical mode %d is not 0 (and) or 1 (or)", mode)
	}
	l := &logical{and: mode == 0}
	n, err := r.count(1)
	if err != nil {
		return headless{}, err
	}
	if n == 0 {
		return headless{}, r.fail("a logical rule without rules")
	}
	l.rules = make([]headless, 0, n)
	for range n {
		h, err := r.readRule(depth + 1)
		if err != nil {
			return headless{}, err
		}
		l.rules = append(l.rules, h)
	}
	inv, err := r.byte()
	if err != nil {
		return headless{}, err
	}
	l.invert = inv != 0
	return headless{logical: l}, nil
}

func (r *srsReader) defaultRule() (headless, error) {
	var h headless
	for {
		item, err := r.byte()
		if err != nil {
			return h, err
		}
		switch item {
		case srsNetwork:
			ss, err := r.strings()
			if err != nil {
				return h, err
			}
			for _, s := range ss {
				switch s {
				case "tcp":
					h.network = append(h.network, netx.TCP)
				case "udp":
					h.network = append(h.network, netx.UDP)
				default:
					return h, r.fail("network %q is not tcp or udp", s)
				}
			}
		case srsDomain:
			if err := r.domains(&h); err != nil {
				return h, err
			}
		case srsDomainKeyword:
			ss, err := r.strings()
			if err != nil {
				return h, err
			}
			for _, s := range ss {
				h.domainKeyword = append(h.domainKeyword, strings.ToLower(s))
			}
		case srsDomainRegex:
			ss, err := r.strings()
			if err != nil {
				return h, err
			}
			for _, s := range ss {
				re, err := regexp.Compile(s)
				if err != nil {
					return h, r.fail("domain_regex %q: %s", s, err)
				}
				h.domainRegex = append(h.domainRegex, re)
			}
		case srsSourceIPCIDR, srsIPCIDR:
			set, err := r.ipSet()
			if err != nil {
				return h, err
			}
			if item == srsIPCIDR {
				h.ipSets = append(h.ipSets, set)
			} else {
				h.srcSets = append(h.srcSets, set)
			}
		case srsSourcePort, srsPort:
			ps, err := r.uint16s()
			if err != nil {
				return h, err
			}
			if item == srsPort {
				h.port = append(h.port, ps...)
			} else {
				h.srcPort = append(h.srcPort, ps...)
			}
		case srsSourcePortRng, srsPortRange:
			ss, err := r.strings()
			if err != nil {
				return h, err
			}
			raw, _ := json.Marshal(ss)
			rs, err := rangeList(raw)
			if err != nil {
				return h, r.fail("%s", err)
			}
			if item == srsPortRange {
				h.portRange = append(h.portRange, rs...)
			} else {
				h.srcPortRange = append(h.srcPortRange, rs...)
			}
		case srsFinal:
			inv, err := r.byte()
			if err != nil {
				return h, err
			}
			h.invert = inv != 0
			if !h.conditions() {
				return h, r.fail("a rule without conditions")
			}
			return h, nil
		default:
			if name, ok := srsItemNames[item]; ok {
				return h, r.fail("rule key %s is not one switchyard matches in a rule set%s", name, whyNot(name))
			}
			return h, r.fail("unknown rule item type %d", item)
		}
	}
}

// domains reads a domain item: a version byte and the succinct trie.
func (r *srsReader) domains(h *headless) error {
	if _, err := r.byte(); err != nil { // the set's version byte
		return err
	}
	leaves, err := r.uint64s()
	if err != nil {
		return err
	}
	bitmap, err := r.uint64s()
	if err != nil {
		return err
	}
	ln, err := r.count(1)
	if err != nil {
		return err
	}
	labels, err := r.bytes(ln)
	if err != nil {
		return err
	}
	t, err := newSRSTrie(leaves, bitmap, labels)
	if err != nil {
		return r.fail("domain: %s", err)
	}
	if r.keyBytes += t.keyBytes; r.keyBytes > srsMaxKeyBytes {
		return r.fail("the names add up to more than %d MiB", srsMaxKeyBytes>>20)
	}
	h.tries = append(h.tries, t)
	return nil
}

// srsIPSet is an IP set of a .srs, checked: n from-to address ranges.
type srsIPSet struct {
	raw []byte
	n   int
}

// each calls fn with the fewest prefixes covering each range.
func (s srsIPSet) each(fn func(netip.Prefix)) {
	r := &srsReader{b: s.raw, rule: -1}
	var ps []netip.Prefix
	for range s.n {
		from, _ := r.addr()
		to, _ := r.addr()
		ps = appendRange(ps[:0], from, to)
		for _, p := range ps {
			fn(p)
		}
	}
}

// ipSet reads an IP set: a version byte 1, a big-endian uint64 count and
// that many from-to address ranges, each address a uvarint length (4 or
// 16) and its bytes.
func (r *srsReader) ipSet() (srsIPSet, error) {
	v, err := r.byte()
	if err != nil {
		return srsIPSet{}, err
	}
	if v != 1 {
		return srsIPSet{}, r.fail("IP set version %d is not 1", v)
	}
	b, err := r.bytes(8)
	if err != nil {
		return srsIPSet{}, err
	}
	n := binary.BigEndian.Uint64(b)
	if n > uint64(len(r.b)-r.pos)/10 {
		return srsIPSet{}, r.fail("%d IP ranges are beyond the end of the rules", n)
	}
	start := r.pos
	for range n {
		from, err := r.addr()
		if err != nil {
			return srsIPSet{}, err
		}
		to, err := r.addr()
		if err != nil {
			return srsIPSet{}, err
		}
		if from.Is4() != to.Is4() || to.Less(from) {
			return srsIPSet{}, r.fail("IP range %s-%s is not a range", from, to)
		}
		r.scratch = appendRange(r.scratch[:0], from, to)
		if r.prefixes += len(r.scratch); r.prefixes > srsMaxPrefixes {
			return srsIPSet{}, r.fail("the IP ranges split into more than %d prefixes", srsMaxPrefixes)
		}
	}
	return srsIPSet{raw: r.b[start:r.pos], n: int(n)}, nil
}

func (r *srsReader) addr() (netip.Addr, error) {
	n, err := r.uvarint()
	if err != nil {
		return netip.Addr{}, err
	}
	if n != 4 && n != 16 {
		return netip.Addr{}, r.fail("an address of %d bytes", n)
	}
	b, err := r.bytes(int(n))
	if err != nil {
		return netip.Addr{}, err
	}
	a, _ := netip.AddrFromSlice(b)
	return a.Unmap(), nil
}

// appendRange appends the fewest prefixes covering from..to (one
// family, from not after to): at each step the largest block aligned at
// from that does not pass to.
func appendRange(out []netip.Prefix, from, to netip.Addr) []netip.Prefix {
	bitLen := from.BitLen()
	a, b := u128Of(from), u128Of(to)
	for {
		k := min(a.trailingZeros(), bitLen)
		for k > 0 && a.or(ones(k)).greater(b) {
			k--
		}
		out = append(out, netip.PrefixFrom(a.addr(bitLen), bitLen-k))
		last := a.or(ones(k))
		if !b.greater(last) {
			return out
		}
		a = last.next()
	}
}

// u128 is an address as a 128-bit number (an IPv4 one in the low 32 bits).
type u128 struct{ hi, lo uint64 }

func u128Of(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{0, uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (x u128) addr(bitLen int) netip.Addr {
	if bitLen == 32 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(x.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:], x.lo)
	return netip.AddrFrom16(b)
}

func (x u128) trailingZeros() int {
	if x.lo != 0 {
		return bits.TrailingZeros64(x.lo)
	}
	return 64 + bits.TrailingZeros64(x.hi)
}

// ones is the number of k low bits set.
func ones(k int) u128 {
	switch {
	case k >= 128:
		return u128{^uint64(0), ^uint64(0)}
	case k >= 64:
		return u128{1<<(k-64) - 1, ^uint64(0)}
	}
	return u128{0, 1<<k - 1}
}

func (x u128) or(y u128) u128      { return u128{x.hi | y.hi, x.lo | y.lo} }
func (x u128) greater(y u128) bool { return x.hi > y.hi || x.hi == y.hi && x.lo > y.lo }

func (x u128) next() u128 {
	if x.lo++; x.lo == 0 {
		x.hi++
	}
	return x
}
