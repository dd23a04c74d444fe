package ruleset

import (
	"bytes"
	"fmt"
	"math/bits"
	"regexp"
	"sort"
	"unicode/utf8"
)

// maxKeyLen bounds a name of a .srs domain trie (its depth).
const maxKeyLen = 4096

// srsTrie is the succinct (LOUDS) trie of a .srs domain item, checked
// when read and walked when compiled: its names go straight into the
// builder, never through a list of strings. In breadth-first order each
// node is a run of 0 bits in bitmap, one per child (whose label is the
// next byte of labels), closed by a 1 bit; node 0 is the root and the
// children are numbered in the order they appear. A node whose leaves bit
// is set ends a key. A key is a name with its bytes reversed rune by rune
// (sing-box's reverseDomain), so that names sharing a suffix share a path.
type srsTrie struct {
	leaves, bitmap []uint64
	labels         []byte   // a slice of the inflated rules
	rank           []uint32 // 1 bits before each word of bitmap
	samples        []uint32 // the word of every 64th 1 bit
	keys           int
	keyBytes       int // the keys' lengths, summed
	plain          int // keys "\rx"
}

func newSRSTrie(leaves, bitmap []uint64, labels []byte) (*srsTrie, error) {
	t := &srsTrie{leaves: leaves, bitmap: bitmap, labels: labels, rank: make([]uint32, len(bitmap)+1)}
	for i, w := range bitmap {
		t.rank[i+1] = t.rank[i] + uint32(bits.OnesCount64(w))
		for k := (t.rank[i] + 63) &^ 63; k < t.rank[i+1]; k += 64 {
			t.samples = append(t.samples, uint32(i))
		}
	}
	// Every node (one per label, and the root) is closed by a 1 bit,
	// and the runs of the closed nodes hold exactly the labels.
	nodes := len(labels) + 1
	if int(t.rank[len(bitmap)]) < nodes {
		return nil, fmt.Errorf("malformed trie: %d labels but %d nodes closed", len(labels), t.rank[len(bitmap)])
	}
	if z := t.select1(nodes-1) - (nodes - 1); z != len(labels) {
		return nil, fmt.Errorf("malformed trie: %d labels for %d children", len(labels), z)
	}
	// Level by level: level [lo, hi)'s children are the nodes up to the
	// number of 0 bits before the close of node hi-1. A key's length is
	// its leaf's level.
	depth := 0
	for lo, hi := 0, 1; hi > lo; depth++ {
		if depth > maxKeyLen {
			return nil, fmt.Errorf("a name longer than %d bytes", maxKeyLen)
		}
		n := t.leavesIn(lo, hi)
		t.keys += n
		t.keyBytes += n * depth
		lo, hi = hi, t.select1(hi-1)-(hi-1)+1
	}
	// A key "\rx" (x a plain string suffix, not "\r.x") becomes a regular
	// expression; sing-box does not write them, so a few are enough.
	for n := 1; n < nodes; n++ {
		if labels[n-1] != srsPrefixLabel || !t.leaf(n) {
			continue
		}
		if parent := t.select0(n-1) - (n - 1); parent == 0 || labels[parent-1] != '.' {
			if t.plain++; t.plain > srsMaxPlain {
				return nil, fmt.Errorf("more than %d plain string suffixes (\"\\r\" keys not followed by a dot)", srsMaxPlain)
			}
		}
	}
	return t, nil
}

// srsMaxPlain bounds the plain string suffixes of a trie.
const srsMaxPlain = 1000

// select0 is the position of the k-th 0 bit (from 0).
func (t *srsTrie) select0(k int) int {
	w := sort.Search(len(t.bitmap), func(i int) bool { return (i+1)*64-int(t.rank[i+1]) > k })
	return w*64 + selectInWord(^t.bitmap[w], k-(w*64-int(t.rank[w])))
}

// select1 is the position of the k-th 1 bit (from 0); -1 for k = -1.
func (t *srsTrie) select1(k int) int {
	if k < 0 {
		return -1
	}
	w := int(t.samples[k>>6])
	for int(t.rank[w+1]) <= k {
		w++
	}
	return w*64 + selectInWord(t.bitmap[w], k-int(t.rank[w]))
}

// selectInWord is the position of x's j-th 1 bit (from 0), x having more.
func selectInWord(x uint64, j int) int {
	pos := 0
	for c := bits.OnesCount8(uint8(x)); j >= c; c = bits.OnesCount8(uint8(x)) {
		j -= c
		x >>= 8
		pos += 8
	}
	for ; j > 0; j-- {
		x &= x - 1
	}
	return pos + bits.TrailingZeros64(x)
}

// leavesIn counts the leaves among nodes lo to hi-1.
func (t *srsTrie) leavesIn(lo, hi int) int {
	n := 0
	for i := lo; i < hi && i>>6 < len(t.leaves); {
		w := t.leaves[i>>6] >> (i & 63)
		if end := (i | 63) + 1; end > hi {
			w &= 1<<(hi-i) - 1
		}
		n += bits.OnesCount64(w)
		i = (i | 63) + 1
	}
	return n
}

func (t *srsTrie) leaf(n int) bool { return n>>6 < len(t.leaves) && t.leaves[n>>6]&(1<<(n&63)) != 0 }

// walk calls fn with each key, un-reversed, depth first.
func (t *srsTrie) walk(fn func(key []byte)) {
	type frame struct{ node, pos, end, depth int }
	path := make([]byte, 0, 256)
	key := make([]byte, 0, 256)
	stack := []frame{{0, 0, t.select1(0), 0}}
	lastK, lastPos := 0, t.select1(0)
	sel := func(k int) int {
		if k == lastK {
			return lastPos
		}
		lastK, lastPos = k, t.select1(k)
		return lastPos
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.pos >= f.end {
			stack = stack[:len(stack)-1]
			continue
		}
		p, node, depth := f.pos, f.node, f.depth+1
		f.pos++
		child := p - node + 1
		if child <= node || depth > maxKeyLen { // not in a trie newSRSTrie accepts
			continue
		}
		path = append(path[:depth-1], t.labels[p-node])
		if t.leaf(child) {
			key = unreverse(key[:0], path)
			fn(key)
		}
		start, end := sel(child-1)+1, sel(child)
		if end > start {
			stack = append(stack, frame{child, start, end, depth})
		}
	}
}

// unreverse appends to dst the runes of s in reverse order, each rune's
// bytes as they are (a byte that is not UTF-8 is a rune of its own).
func unreverse(dst, s []byte) []byte {
	n := len(s)
	dst = append(dst, s...)
	for i := 0; i < n; {
		if s[i] < utf8.RuneSelf {
			dst[len(dst)-1-i] = s[i]
			i++
			continue
		}
		_, w := utf8.DecodeRune(s[i:])
		copy(dst[len(dst)-i-w:], s[i:i+w])
		i += w
	}
	return dst
}

// addTo sorts each key into its kind: a name ("x"), a suffix ("\nx": x
// and the names under it), the names under x ("\r.x"), or a plain string
// suffix ("\rx").
func (t *srsTrie) addTo(b *DomainBuilder) {
	b.Grow(t.keys)
	t.walk(func(k []byte) {
		if ascii := lowerASCII(k); !ascii {
			k = bytes.ToLower(k) // as a flow's name is lowered
		}
		switch {
		case len(k) == 0:
		case k[0] == srsRootLabel:
			b.addBytes(kindSuffix, k[1:])
		case k[0] == srsPrefixLabel && len(k) > 1 && k[1] == '.':
			b.addBytes(kindSub, k[2:])
		case k[0] == srsPrefixLabel:
			b.Regexp(regexp.MustCompile(regexp.QuoteMeta(string(k[1:])) + "$"))
		default:
			b.addBytes(kindExact, k)
		}
	})
}

// lowerASCII lowers b's ASCII letters in place and reports whether b is
// all ASCII.
func lowerASCII(b []byte) bool {
	ascii := true
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return ascii
}
