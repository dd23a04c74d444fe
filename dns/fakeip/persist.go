package fakeip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Snapshot returns every mapping, the most recently used first.
func (t *Table) Snapshot() []Mapping {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := make([]Mapping, 0, len(t.byName))
	for i := t.head; i >= 0; i = t.slots[i].next {
		s := &t.slots[i]
		m := Mapping{Name: s.name, V4: t.v4.addr(i), V6: t.v6.addr(i)}
		if s.last != 0 {
			m.LastUsed = time.Unix(0, s.last)
		}
		ms = append(ms, m)
	}
	return ms
}

// Restore replaces the table's mappings with ms (a Snapshot, perhaps of
// another run) and returns how many it kept. A mapping keeps its
// addresses: its index comes from V4 when the table has an IPv4 range,
// else from V6, and the other family's address, when given and ranged,
// must agree. A mapping is skipped when its name is empty, too long or
// already restored, when its addresses are not ones this table hands out
// (the ranges changed) or are taken, or when the table is full: the most
// recently used are kept first.
func (t *Table) Restore(ms []Mapping) int {
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b Mapping) int { return b.LastUsed.Compare(a.LastUsed) })

	t.mu.Lock()
	defer t.mu.Unlock()
	t.byName = make(map[string]int32, min(len(sorted), t.size))
	t.slots = nil
	t.free = nil
	t.head, t.tail = -1, -1
	for _, m := range sorted {
		if len(t.byName) >= t.size {
			break
		}
		name := normalize(m.Name)
		if name == "" || len(name) > maxName {
			continue
		}
		if _, dup := t.byName[name]; dup {
			continue
		}
		i, ok := t.indexOf(m)
		if !ok || int(i) >= t.size {
			continue
		}
		if int(i) >= len(t.slots) {
			t.slots = append(t.slots, make([]slot, int(i)+1-len(t.slots))...)
		} else if t.slots[i].name != "" {
			continue
		}
		name = strings.Clone(name)
		var last int64
		if !m.LastUsed.IsZero() && !m.LastUsed.Before(minTime) && !m.LastUsed.After(maxTime) {
			last = m.LastUsed.UnixNano()
		}
		t.slots[i] = slot{name: name, last: last}
		t.byName[name] = i
		t.pushBack(i)
	}
	for i := len(t.slots) - 1; i >= 0; i-- {
		if t.slots[i].name == "" {
			t.free = append(t.free, int32(i))
		}
	}
	return len(t.byName)
}

// indexOf returns the index m's addresses stand for in this table.
func (t *Table) indexOf(m Mapping) (int32, bool) {
	var (
		i      int32
		ok     bool
		picked bool
	)
	if t.v4.used && m.V4.IsValid() {
		if i, ok = t.v4.index(m.V4); !ok {
			return 0, false
		}
		picked = true
	}
	if t.v6.used && m.V6.IsValid() {
		j, ok := t.v6.index(m.V6)
		if !ok || (picked && j != i) {
			return 0, false
		}
		i, picked = j, true
	}
	return i, picked
}

// The binary form of a table's mappings, version 1: the byte 1, the count
// as a uvarint, then per mapping, most recently used first: the name's
// length (uvarint) and bytes, a byte of flags (1: an IPv4 address follows,
// 2: an IPv6 address follows), the 4 and/or 16 address bytes, and LastUsed
// in Unix nanoseconds as a varint (0: none).
const (
	binaryVersion = 1
	hasV4         = 1
	hasV6         = 2
)

// ErrBadBinary is the error of UnmarshalBinary for data not made by
// MarshalBinary.
var ErrBadBinary = errors.New("fake ip: bad saved mappings")

// MarshalBinary returns the table's mappings in a compact binary form
// (encoding.BinaryMarshaler), for the state store.
func (t *Table) MarshalBinary() ([]byte, error) {
	ms := t.Snapshot()
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(ms)*48)
	b = append(b, binaryVersion)
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		b = binary.AppendUvarint(b, uint64(len(m.Name)))
		b = append(b, m.Name...)
		var flags byte
		if m.V4.IsValid() {
			flags |= hasV4
		}
		if m.V6.IsValid() {
			flags |= hasV6
		}
		b = append(b, flags)
		if m.V4.IsValid() {
			a := m.V4.As4()
			b = append(b, a[:]...)
		}
		if m.V6.IsValid() {
			a := m.V6.As16()
			b = append(b, a[:]...)
		}
		var last int64
		if !m.LastUsed.IsZero() {
			last = m.LastUsed.UnixNano()
		}
		b = binary.AppendVarint(b, last)
	}
	return b, nil
}

// UnmarshalBinary restores the mappings MarshalBinary saved
// (encoding.BinaryUnmarshaler), as Restore does. Data it cannot read is an
// error that Is ErrBadBinary, and leaves the table as it was.
func (t *Table) UnmarshalBinary(b []byte) error {
	ms, err := decode(b)
	if err != nil {
		return err
	}
	t.Restore(ms)
	return nil
}

func decode(b []byte) ([]Mapping, error) {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrBadBinary, what) }
	if len(b) == 0 || b[0] != binaryVersion {
		return nil, bad("unknown version")
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, bad("no count")
	}
	b = b[k:]
	// Each mapping takes at least 3 bytes: so many fit, at most.
	if n > uint64(len(b))/3 || n > MaxSize {
		return nil, bad("count larger than the data")
	}
	ms := make([]Mapping, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > maxName || uint64(len(b)-k) < l+1 {
			return nil, bad("name")
		}
		b = b[k:]
		m := Mapping{Name: string(b[:l])}
		flags := b[l]
		b = b[l+1:]
		if flags&^(hasV4|hasV6) != 0 {
			return nil, bad("flags")
		}
		if flags&hasV4 != 0 {
			if len(b) < 4 {
				return nil, bad("IPv4 address")
			}
			m.V4 = netip.AddrFrom4([4]byte(b[:4]))
			b = b[4:]
		}
		if flags&hasV6 != 0 {
			if len(b) < 16 {
				return nil, bad("IPv6 address")
			}
			m.V6 = netip.AddrFrom16([16]byte(b[:16]))
			b = b[16:]
		}
		last, k := binary.Varint(b)
		if k <= 0 {
			return nil, bad("last use")
		}
		b = b[k:]
		if last != 0 {
			m.LastUsed = time.Unix(0, last)
		}
		ms = append(ms, m)
	}
	if len(b) != 0 {
		return nil, bad("trailing bytes")
	}
	return ms, nil
}
