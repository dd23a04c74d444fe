package fakeip

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func mustNew(t testing.TB, cfg Config) *Table {
	t.Helper()
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

var (
	v4Range = netip.MustParsePrefix("198.18.0.0/15")
	v6Range = netip.MustParsePrefix("fc00::/18")
)

// Addresses are handed out in order from the first after the range's
// network address, the same index in both families.
func TestAllocationOrder(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range})
	for i, want := range []struct{ v4, v6 string }{
		{"198.18.0.1", "fc00::1"},
		{"198.18.0.2", "fc00::2"},
		{"198.18.0.3", "fc00::3"},
	} {
		v4, v6 := tb.Lookup(fmt.Sprintf("n%d.test", i))
		if v4.String() != want.v4 || v6.String() != want.v6 {
			t.Fatalf("name %d: %v %v, want %s %s", i, v4, v6, want.v4, want.v6)
		}
	}
	// The same name, in any case and with its trailing dot, keeps them.
	if v4, _ := tb.Lookup("N1.Test."); v4.String() != "198.18.0.2" {
		t.Fatalf("again: %v", v4)
	}
	if tb.Len() != 3 || tb.Size() != DefaultSize {
		t.Fatalf("len %d size %d", tb.Len(), tb.Size())
	}
}

// A table with one family gives invalid addresses for the other.
func TestOneFamily(t *testing.T) {
	tb := mustNew(t, Config{IPv6: v6Range})
	v4, v6 := tb.Lookup("a.test")
	if v4.IsValid() || v6.String() != "fc00::1" || tb.HasIPv4() || !tb.HasIPv6() {
		t.Fatalf("%v %v", v4, v6)
	}
}

// The size is bounded by the range: a /29 hands out 6 addresses, and the
// first and last are never handed out.
func TestTheRangeBoundsTheSize(t *testing.T) {
	tb := mustNew(t, Config{IPv4: netip.MustParsePrefix("10.0.0.0/29")})
	if tb.Size() != 6 {
		t.Fatalf("size %d", tb.Size())
	}
	seen := map[netip.Addr]bool{}
	for i := range 20 {
		v4, _ := tb.Lookup(fmt.Sprintf("n%d.test", i))
		seen[v4] = true
	}
	if len(seen) != 6 || seen[netip.MustParseAddr("10.0.0.0")] || seen[netip.MustParseAddr("10.0.0.7")] {
		t.Fatalf("handed out %v", seen)
	}
	if tb.Len() != 6 {
		t.Fatalf("len %d", tb.Len())
	}
}

// When full, the least recently used mapping is recycled; a use in either
// direction counts.
func TestFullTableRecyclesTheLeastRecentlyUsed(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, Size: 3})
	a, _ := tb.Lookup("a.test")
	b, _ := tb.Lookup("b.test")
	tb.Lookup("c.test")
	tb.Lookup("a.test") // a is used again: b is now the oldest
	d, _ := tb.Lookup("d.test")
	if d != b {
		t.Fatalf("d got %v, want b's %v", d, b)
	}
	if _, ok := tb.Name(b); !ok {
		t.Fatal("b's address lost its mapping")
	}
	if name, _ := tb.Name(b); name != "d.test" {
		t.Fatalf("b's address maps to %q", name)
	}
	// A reverse lookup of a keeps it; c is the oldest now.
	if name, ok := tb.Name(a); !ok || name != "a.test" {
		t.Fatalf("Name(a) = %q %v", name, ok)
	}
	e, _ := tb.Lookup("e.test")
	if got, _ := tb.Name(e); got != "e.test" {
		t.Fatal(got)
	}
	if name, _ := tb.Name(a); name != "a.test" {
		t.Fatal("a was recycled though used")
	}
	for _, n := range tb.Snapshot() {
		if n.Name == "c.test" || n.Name == "b.test" {
			t.Fatalf("%s is still mapped", n.Name)
		}
	}
	if tb.Len() != 3 {
		t.Fatalf("len %d", tb.Len())
	}
}

func TestReverseLookup(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range})
	v4, v6 := tb.Lookup("Example.COM.")
	for _, ip := range []netip.Addr{v4, v6, netip.AddrFrom16(v4.As16())} {
		if name, ok := tb.Name(ip); !ok || name != "example.com" {
			t.Fatalf("Name(%v) = %q %v", ip, name, ok)
		}
	}
	for _, ip := range []string{"198.18.0.2", "198.18.0.0", "198.19.255.255", "1.1.1.1", "fc00::2", "::1"} {
		if name, ok := tb.Name(netip.MustParseAddr(ip)); ok {
			t.Fatalf("Name(%s) = %q", ip, name)
		}
	}
	for ip, want := range map[string]bool{
		"198.18.0.0": true, "198.19.255.255": true, "198.18.7.7": true, "198.20.0.0": false,
		"fc00::": true, "fc00:3fff:ffff::": true, "fc00:4000::": false, "::ffff:198.18.0.9": true,
	} {
		if got := tb.Contains(netip.MustParseAddr(ip)); got != want {
			t.Fatalf("Contains(%s) = %v", ip, got)
		}
	}
}

func TestFilter(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, Filter: []string{"LAN", ".local.", "corp.example"}})
	for name, want := range map[string]bool{
		"lan": true, "printer.lan": true, "printer.LAN.": true, "a.b.local": true,
		"corp.example": true, "x.corp.example.": true,
		"example": false, "plan": false, "lan.com": false, "notcorp.example": false, "": false,
	} {
		if got := tb.Filtered(name); got != want {
			t.Fatalf("Filtered(%q) = %v", name, got)
		}
	}
	if _, err := New(Config{IPv4: v4Range, Filter: []string{"."}}); err == nil {
		t.Fatal("an empty filter entry was accepted")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{IPv4: v6Range},
		{IPv6: v4Range},
		{IPv4: netip.MustParsePrefix("10.0.0.0/31")},
		{IPv4: netip.MustParsePrefix("10.0.0.1/32")},
		{IPv6: netip.MustParsePrefix("fc00::/127")},
		{IPv4: v4Range, Size: -1},
		{IPv4: v4Range, Size: MaxSize + 1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	// A /30 has two addresses to hand out.
	if tb := mustNew(t, Config{IPv4: netip.MustParsePrefix("10.0.0.0/30")}); tb.Size() != 2 {
		t.Fatalf("size %d", tb.Size())
	}
	// An unmasked prefix is taken as its network.
	tb := mustNew(t, Config{IPv4: netip.MustParsePrefix("198.18.0.1/16")})
	if v4, _ := tb.Lookup("a.test"); v4.String() != "198.18.0.1" {
		t.Fatal(v4)
	}
}

func TestNamesThatGetNoAddress(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range})
	long := make([]byte, 254)
	for i := range long {
		long[i] = 'a'
	}
	for _, n := range []string{"", ".", string(long)} {
		if v4, v6 := tb.Lookup(n); v4.IsValid() || v6.IsValid() {
			t.Fatalf("Lookup(%.10q) = %v", n, v4)
		}
	}
	if tb.Len() != 0 {
		t.Fatal(tb.Len())
	}
}

// A hit allocates nothing.
func TestLookupHitDoesNotAllocate(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range})
	tb.Lookup("www.example.com")
	ip, _ := tb.Lookup("www.example.com")
	if n := testing.AllocsPerRun(100, func() { tb.Lookup("www.example.com.") }); n != 0 {
		t.Fatalf("Lookup hit: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { tb.Name(ip) }); n != 0 {
		t.Fatalf("Name hit: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { tb.Filtered("www.example.com.") }); n != 0 {
		t.Fatalf("Filtered: %v allocations", n)
	}
}

func TestConcurrentUse(t *testing.T) {
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Size: 100})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				name := fmt.Sprintf("n%d.test", (g*7+i)%300)
				v4, v6 := tb.Lookup(name)
				tb.Name(v6)
				tb.Name(v4)
				tb.Filtered(name)
				if i%50 == 0 {
					tb.Snapshot()
				}
				if i%200 == 0 && g == 0 {
					tb.Restore(tb.Snapshot())
				}
			}
		}()
	}
	wg.Wait()
	if tb.Len() > 100 {
		t.Fatalf("len %d over size 100", tb.Len())
	}
	checkConsistent(t, tb)
}

// checkConsistent checks that each mapping's addresses lead back to it,
// and that the LRU list holds every mapping once.
func checkConsistent(t *testing.T, tb *Table) {
	t.Helper()
	ms := tb.Snapshot()
	if len(ms) != tb.Len() {
		t.Fatalf("snapshot %d, len %d", len(ms), tb.Len())
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.Name] {
			t.Fatalf("%s twice", m.Name)
		}
		seen[m.Name] = true
		if got, ok := tb.Name(m.V4); !ok || got != m.Name {
			t.Fatalf("Name(%v) = %q, want %q", m.V4, got, m.Name)
		}
	}
}

func TestSnapshotRestore(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Now: clock})
	for _, n := range []string{"a.test", "b.test", "c.test", "d.test"} {
		tb.Lookup(n)
	}
	tb.Lookup("a.test")
	snap := tb.Snapshot()
	if len(snap) != 4 || snap[0].Name != "a.test" || snap[3].Name != "b.test" {
		t.Fatalf("snapshot order %v", snap)
	}
	if !snap[0].LastUsed.Equal(time.Unix(1_700_000_005, 0)) {
		t.Fatalf("last used %v", snap[0].LastUsed)
	}

	// A new table of the same config gets the same mappings and order.
	other := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Now: clock})
	if n := other.Restore(snap); n != 4 {
		t.Fatalf("restored %d", n)
	}
	got := other.Snapshot()
	for i := range snap {
		if got[i] != snap[i] {
			t.Fatalf("restored %v, want %v", got[i], snap[i])
		}
	}
	// A new name takes the next index after the highest, d's + 1.
	if v4, _ := other.Lookup("e.test"); v4.String() != "198.18.0.5" {
		t.Fatalf("e got %v", v4)
	}
	checkConsistent(t, other)

	// Holes left by Restore are filled lowest first.
	holes := mustNew(t, Config{IPv4: v4Range})
	holes.Restore([]Mapping{{Name: "x.test", V4: netip.MustParseAddr("198.18.0.3")}})
	for _, want := range []string{"198.18.0.1", "198.18.0.2", "198.18.0.4"} {
		if v4, _ := holes.Lookup("n" + want); v4.String() != want {
			t.Fatalf("got %v, want %s", v4, want)
		}
	}
}

// Restore skips what does not fit this table: other ranges, inconsistent
// pairs, duplicates, and more than Size (keeping the most recent).
func TestRestoreSkipsWhatDoesNotFit(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Size: 3})
	n := tb.Restore([]Mapping{
		{Name: "old.test", V4: netip.MustParseAddr("198.18.0.9"), LastUsed: at(1)},
		{Name: "a.test", V4: netip.MustParseAddr("198.18.0.1"), V6: netip.MustParseAddr("fc00::1"), LastUsed: at(10)},
		{Name: "A.test.", V4: netip.MustParseAddr("198.18.0.2"), LastUsed: at(9)},                                    // duplicate name
		{Name: "b.test", V4: netip.MustParseAddr("198.18.0.1"), LastUsed: at(8)},                                     // address taken
		{Name: "c.test", V4: netip.MustParseAddr("10.0.0.1"), LastUsed: at(7)},                                       // not in range
		{Name: "d.test", V4: netip.MustParseAddr("198.18.0.4"), V6: netip.MustParseAddr("fc00::5"), LastUsed: at(6)}, // disagree
		{Name: "e.test", V6: netip.MustParseAddr("fc00::2"), LastUsed: at(5)},                                        // v6 only: fine
		{Name: "f.test", V4: netip.MustParseAddr("198.18.0.3"), LastUsed: at(4)},
		{Name: "g.test", V4: netip.MustParseAddr("198.18.0.7"), LastUsed: at(3)}, // beyond size 3
		{Name: "", V4: netip.MustParseAddr("198.18.0.3"), LastUsed: at(2)},
	})
	if n != 3 {
		t.Fatalf("restored %d", n)
	}
	var names []string
	for _, m := range tb.Snapshot() {
		names = append(names, m.Name)
	}
	if fmt.Sprint(names) != "[a.test e.test f.test]" {
		t.Fatalf("restored %v", names)
	}
	if _, v6 := tb.Lookup("e.test"); v6.String() != "fc00::2" {
		t.Fatal(v6)
	}
	checkConsistent(t, tb)
}

func TestBinaryRoundTrip(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { now = now.Add(time.Millisecond); return now }
	tb := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range, Now: clock})
	for i := range 50 {
		tb.Lookup(fmt.Sprintf("host%d.example", i))
	}
	b, err := tb.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	other := mustNew(t, Config{IPv4: v4Range, IPv6: v6Range})
	if err := other.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want, got := tb.Snapshot(), other.Snapshot()
	if len(got) != len(want) {
		t.Fatalf("%d mappings, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].LastUsed.Equal(want[i].LastUsed) || got[i].Name != want[i].Name || got[i].V4 != want[i].V4 || got[i].V6 != want[i].V6 {
			t.Fatalf("%v, want %v", got[i], want[i])
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1}, {1, 5, 0}, append(append([]byte(nil), b...), 0), b[:len(b)-1]} {
		before := other.Len()
		if err := other.UnmarshalBinary(bad); err == nil {
			t.Fatalf("UnmarshalBinary(% x) succeeded", bad)
		}
		if other.Len() != before {
			t.Fatal("a failed UnmarshalBinary changed the table")
		}
	}
}

// Flush forgets every mapping; the table hands addresses out again from
// the start of its range.
func TestFlush(t *testing.T) {
	tb, err := New(Config{IPv4: netip.MustParsePrefix("198.18.0.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tb.Lookup("a.test")
	tb.Lookup("b.test")
	if n := tb.Flush(); n != 2 || tb.Len() != 0 {
		t.Fatalf("flushed %d, %d left", n, tb.Len())
	}
	if _, ok := tb.Name(a); ok {
		t.Fatal("an address handed out before the flush still has a name")
	}
	if b, _ := tb.Lookup("b.test"); b != a {
		t.Fatalf("after a flush the first name got %v, want the range's first address %v", b, a)
	}
}
