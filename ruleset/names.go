package ruleset

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"strings"
)

// The kinds of entry a name-table node can end.
const (
	kindExact  = 1 << iota // the name itself
	kindSuffix             // the name and every name under it
	kindSub                // the names under it, not itself (Clash ".x")
	kindLabel              // the names exactly one label under it (Clash "*.x")
)

// chunkSize is the size of the arena's chunks: a record starts within
// its chunk's first chunkSize bytes (a label longer than a chunk gets a
// chunk of its own).
const chunkSize = 1 << 16

// nameTable is a trie of the labels of names, read from the right
// ("com", then "example" under it, ...), held as a byte arena of node
// records and one open-addressing hash table keyed by (parent node, label).
// A node record is the parent's id (uint32, little-endian), the kinds of
// entry the node ends (a byte), the label's length (uvarint) and the
// label. The arena is a list of chunks, so that it grows without copying;
// a node is named by its record's chunk (high 16 bits) and position in it
// (low 16 bits), the root by 0 (chunk 0 starts with one unused byte). A
// lookup is one probe per label of the name and stops at the first label
// the table does not hold; there is no string header, pointer or
// per-entry allocation to hold.
type nameTable struct {
	arena [][]byte
	slots []uint32 // node ids; meaningful where tags is not 0
	tags  []byte   // 0: empty slot; else 0x80 | 7 bits of the key's hash
	n     int      // nodes
	seed  maphash.Seed
}

// maxLoad is the fill (in eighths of the slots) a table grows beyond.
const maxLoad = 6.5

// init readies an empty table sized for about hint nodes.
func (t *nameTable) init(hint int) {
	t.seed = maphash.MakeSeed()
	t.arena = [][]byte{make([]byte, 1, min(chunkSize, max(64, hint*12)))}
	t.alloc(hint)
}

// alloc makes an empty table of a power of two slots for n nodes.
func (t *nameTable) alloc(n int) {
	size := 8
	for float64(size)*maxLoad/8 < float64(n) {
		size *= 2
	}
	t.slots = make([]uint32, size)
	t.tags = make([]byte, size)
}

func mix(h uint64, parent uint32) uint64 {
	h ^= uint64(parent) * 0x9e3779b97f4a7c15
	h ^= h >> 32
	return h * 0xd6e8feb86659fd93
}

func tagOf(h uint64) byte { return byte(h>>57) | 0x80 }

// record is the node id's record: its parent and its label.
func (t *nameTable) record(id uint32) (parent uint32, label []byte) {
	r := t.arena[id>>16][id&0xffff:]
	l, n := binary.Uvarint(r[5:])
	return binary.LittleEndian.Uint32(r), r[5+n : 5+n+int(l)]
}

// kinds is the byte of node id's kinds.
func (t *nameTable) kinds(id uint32) *byte { return &t.arena[id>>16][id&0xffff+4] }

// find is the node of label under parent, or 0.
func (t *nameTable) find(parent uint32, label string) uint32 {
	h := mix(maphash.String(t.seed, label), parent)
	tag := tagOf(h)
	mask := uint64(len(t.tags) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return 0
		case tag:
			id := t.slots[i]
			if p, l := t.record(id); p == parent && string(l) == label {
				return id
			}
		}
	}
}

// findOrAdd is the node of label under parent, added if it is not there.
func (t *nameTable) findOrAdd(parent uint32, label []byte) uint32 {
	h := mix(maphash.Bytes(t.seed, label), parent)
	tag := tagOf(h)
	mask := uint64(len(t.tags) - 1)
	i := h & mask
	for ; t.tags[i] != 0; i = (i + 1) & mask {
		if t.tags[i] == tag {
			id := t.slots[i]
			if p, l := t.record(id); p == parent && bytes.Equal(l, label) {
				return id
			}
		}
	}
	need := 5 + binary.MaxVarintLen64 + len(label)
	last := len(t.arena) - 1
	switch c := t.arena[last]; {
	case len(c)+need <= cap(c) && len(c) < chunkSize:
	case len(c)+need <= chunkSize:
		// A small table's one chunk grows as a slice does (ids are
		// positions, not pointers), so that it does not start at a
		// chunk's size.
		t.arena[last] = append(make([]byte, 0, min(chunkSize, max(2*cap(c), len(c)+need))), c...)
	case last+1 > 0xffff:
		return 0
	default:
		t.arena = append(t.arena, make([]byte, 0, max(chunkSize, need)))
		last++
	}
	c := t.arena[last]
	id := uint32(last)<<16 | uint32(len(c))
	c = binary.LittleEndian.AppendUint32(c, parent)
	c = append(c, 0)
	c = binary.AppendUvarint(c, uint64(len(label)))
	t.arena[last] = append(c, label...)
	t.tags[i], t.slots[i] = tag, id
	t.n++
	if float64(t.n) > float64(len(t.tags))*maxLoad/8 {
		t.grow()
	}
	return id
}

func (t *nameTable) grow() {
	slots, tags := t.slots, t.tags
	t.alloc(len(tags)) // twice the slots: alloc sizes for a fill of maxLoad
	mask := uint64(len(t.tags) - 1)
	for j, tag := range tags {
		if tag == 0 {
			continue
		}
		id := slots[j]
		p, l := t.record(id)
		h := mix(maphash.Bytes(t.seed, l), p)
		i := h & mask
		for t.tags[i] != 0 {
			i = (i + 1) & mask
		}
		t.tags[i], t.slots[i] = tagOf(h), id
	}
}

// add marks name (labels split on dots) as an entry of kind. It is false
// only when the arena is full (65,535 chunks: beyond any input the
// parsers accept).
func (t *nameTable) add(kind byte, name []byte) bool {
	parent := uint32(0)
	for end := len(name); ; {
		i := bytes.LastIndexByte(name[:end], '.')
		if parent = t.findOrAdd(parent, name[i+1:end]); parent == 0 {
			return false
		}
		if i < 0 {
			break
		}
		end = i
	}
	*t.kinds(parent) |= kind
	return true
}

// match reports whether name is an entry or is under one, by kind.
func (t *nameTable) match(name string) bool {
	if t.n == 0 {
		return false
	}
	parent := uint32(0)
	for end := len(name); ; {
		i := strings.LastIndexByte(name[:end], '.')
		id := t.find(parent, name[i+1:end])
		if id == 0 {
			return false
		}
		k := *t.kinds(id)
		if i < 0 { // the whole name
			return k&(kindExact|kindSuffix) != 0
		}
		if k&(kindSuffix|kindSub) != 0 {
			return true
		}
		if k&kindLabel != 0 && strings.IndexByte(name[:i], '.') < 0 {
			return true
		}
		parent, end = id, i
	}
}

// trim drops the spare capacity of the arena's last chunk.
func (t *nameTable) trim() {
	last := len(t.arena) - 1
	if c := t.arena[last]; cap(c)-len(c) > 4096 {
		t.arena[last] = append([]byte(nil), c...)
	}
}
