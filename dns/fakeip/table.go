package fakeip

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// DefaultSize is the number of mappings a table keeps when Config.Size is
// 0: spec.FakeIP's default, and the count of addresses in a /16.
const DefaultSize = 65536

// MaxSize bounds Config.Size: 2^24 mappings (a /8), about 1 GiB of names at
// their longest; far beyond any client's working set.
const MaxSize = 1 << 24

// Config describes a table.
type Config struct {
	// IPv4 and IPv6 are the ranges addresses come from; an invalid prefix
	// means none of that family. At least one is needed.
	IPv4, IPv6 netip.Prefix
	// Size bounds the mappings kept; 0 means DefaultSize. The table holds
	// no more than either range can number.
	Size int
	// Filter lists the domain suffixes whose names get real answers: a
	// name is filtered when it is an entry or lies under one. Entries are
	// compared in ASCII lowercase, a leading or trailing dot ignored.
	Filter []string
	// Now is the clock of LastUsed; nil means time.Now.
	Now func() time.Time
}

// Mapping is one name and its fake addresses (an invalid address for a
// family without a range), with when it was last used.
type Mapping struct {
	Name     string
	V4, V6   netip.Addr
	LastUsed time.Time
}

// Table maps names to fake addresses and back. It is bounded (Config.Size
// mappings) and safe for concurrent use.
type Table struct {
	v4, v6 span
	size   int // the bound: Config.Size, or fewer addresses in a range
	filter filter
	now    func() time.Time

	mu     sync.Mutex // guards the fields below
	byName map[string]int32
	// slots[i] is the mapping of the addresses of index i, its name empty
	// when free; it grows as addresses are handed out, up to size.
	slots []slot
	free  []int32 // free indexes below len(slots), the lowest last
	// head is the most recently used slot, tail the least; -1 when none.
	head, tail int32
}

type slot struct {
	name       string
	last       int64 // LastUsed, in Unix nanoseconds; 0 for none
	prev, next int32 // the LRU list: prev is more recent
}

// New returns an empty table.
func New(cfg Config) (*Table, error) {
	if !cfg.IPv4.IsValid() && !cfg.IPv6.IsValid() {
		return nil, errors.New("fake ip: no range: set ipv4, ipv6 or both")
	}
	v4, err := newSpan(cfg.IPv4, "IPv4")
	if err != nil {
		return nil, err
	}
	v6, err := newSpan(cfg.IPv6, "IPv6")
	if err != nil {
		return nil, err
	}
	size := cfg.Size
	switch {
	case size == 0:
		size = DefaultSize
	case size < 0 || size > MaxSize:
		return nil, fmt.Errorf("fake ip: size %d is out of 1..%d", size, MaxSize)
	}
	for _, s := range []span{v4, v6} {
		if s.used {
			size = min(size, s.usable)
		}
	}
	f, err := newFilter(cfg.Filter)
	if err != nil {
		return nil, err
	}
	t := &Table{
		v4:     v4,
		v6:     v6,
		size:   size,
		filter: f,
		now:    cfg.Now,
		byName: make(map[string]int32),
		head:   -1,
		tail:   -1,
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t, nil
}

// Size returns the most mappings the table keeps.
func (t *Table) Size() int { return t.size }

// Len returns the mappings the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byName)
}

// HasIPv4 and HasIPv6 report whether the table has a range of that family.
func (t *Table) HasIPv4() bool { return t.v4.used }
func (t *Table) HasIPv6() bool { return t.v6.used }

// Lookup returns name's fake addresses (an invalid address for a family
// with no range), handing them out if name has none: the lowest free
// index, and when the table is full, the addresses of the least recently
// used mapping, which is dropped. Names are compared in ASCII lowercase
// without their trailing dot. An empty name, or one longer than a DNS name
// can be, gets no addresses. A hit allocates nothing for a lowercase name.
func (t *Table) Lookup(name string) (v4, v6 netip.Addr) {
	name = normalize(name)
	if name == "" || len(name) > maxName {
		return netip.Addr{}, netip.Addr{}
	}
	now := t.stamp()
	t.mu.Lock()
	i, ok := t.byName[name]
	if !ok {
		i = t.allocate(strings.Clone(name))
	} else {
		t.unlink(i)
	}
	t.slots[i].last = now
	t.pushFront(i)
	t.mu.Unlock()
	return t.v4.addr(i), t.v6.addr(i)
}

// Name returns the name ip was handed out to, and whether there is one;
// it counts as a use of the mapping.
func (t *Table) Name(ip netip.Addr) (string, bool) {
	i, ok := t.v4.index(ip)
	if !ok {
		if i, ok = t.v6.index(ip); !ok {
			return "", false
		}
	}
	now := t.stamp()
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(i) >= len(t.slots) || t.slots[i].name == "" {
		return "", false
	}
	t.unlink(i)
	t.slots[i].last = now
	t.pushFront(i)
	return t.slots[i].name, true
}

// Contains reports whether ip lies in one of the table's ranges (its first
// and last addresses included), whether or not it is handed out.
func (t *Table) Contains(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	return (t.v4.used && t.v4.prefix.Contains(ip)) || (t.v6.used && t.v6.prefix.Contains(ip))
}

// Filtered reports whether name gets a real answer: it is one of the
// filter's suffixes or lies under one.
func (t *Table) Filtered(name string) bool {
	return t.filter.match(normalize(name))
}

func (t *Table) stamp() int64 {
	n := t.now()
	if n.Before(minTime) || n.After(maxTime) {
		return 0
	}
	return n.UnixNano()
}

// The times a Unix nanosecond count holds.
var (
	minTime = time.Unix(0, math.MinInt64+1)
	maxTime = time.Unix(0, math.MaxInt64)
)

// allocate gives name the lowest free index and returns it, unlinked;
// t.mu is held.
func (t *Table) allocate(name string) int32 {
	var i int32
	switch {
	case len(t.free) > 0:
		i = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case len(t.slots) < t.size:
		i = int32(len(t.slots))
		t.slots = append(t.slots, slot{})
	default:
		i = t.tail
		t.unlink(i)
		delete(t.byName, t.slots[i].name)
	}
	t.slots[i] = slot{name: name, prev: -1, next: -1}
	t.byName[name] = i
	return i
}

// unlink takes i out of the LRU list; t.mu is held.
func (t *Table) unlink(i int32) {
	s := &t.slots[i]
	if s.prev >= 0 {
		t.slots[s.prev].next = s.next
	} else {
		t.head = s.next
	}
	if s.next >= 0 {
		t.slots[s.next].prev = s.prev
	} else {
		t.tail = s.prev
	}
	s.prev, s.next = -1, -1
}

// pushFront makes i the most recently used; t.mu is held.
func (t *Table) pushFront(i int32) {
	s := &t.slots[i]
	s.prev, s.next = -1, t.head
	if t.head >= 0 {
		t.slots[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

// pushBack makes i the least recently used; t.mu is held.
func (t *Table) pushBack(i int32) {
	s := &t.slots[i]
	s.prev, s.next = t.tail, -1
	if t.tail >= 0 {
		t.slots[t.tail].next = i
	}
	t.tail = i
	if t.head < 0 {
		t.head = i
	}
}

// Flush forgets every mapping: the next question for any name gets a fresh
// address, and a flow to an address handed out before is refused (it maps
// to no name). It returns how many mappings were dropped.
func (t *Table) Flush() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.byName)
	t.byName = make(map[string]int32)
	t.slots, t.free = nil, nil
	t.head, t.tail = -1, -1
	return n
}
