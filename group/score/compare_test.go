package score

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

var cgrp = GroupID{0xcc}

func cnode(i int) health.NodeID { return health.NodeID{0xcc, byte(i)} }

func ckey(i int, tgt string) cmpKey {
	return cmpKey{group: cgrp, node: cnode(i), net: netx.TCP, fam: uint8(netx.V4), tgt: target{text: tgt}}
}

// feed gives node i on tgt four reporters' responses of v ms at t.
func feed(s *compareStore, i int, tgt string, t int64, v float64) {
	for r := range CompareReporters {
		s.add(ckey(i, tgt), int64(BlockWidth), cmpResponse, t, v, uint64(1000*i+r+1), true)
	}
}

func TestCompareStoreBounds(t *testing.T) {
	for _, nameLen := range []int{16, MaxNameLen} {
		s := newCompareStore()
		pad := strings.Repeat("x", nameLen-8)
		for i := range 3 * CompareCells {
			s.add(ckey(i%200, fmt.Sprintf("%06d%s:1", i, pad)), int64(BlockWidth), cmpResponse, 1e9, 1, 1, true)
			if n, b := s.size(); n > CompareCells || b > CompareBytes {
				t.Fatalf("%d-byte names: %d cells, %d bytes", nameLen, n, b)
			}
		}
		n, b := s.size()
		t.Logf("%d-byte names: %d cells, %d accounted bytes", nameLen, n, b)
		if n != CompareCells {
			t.Errorf("store not full: %d", n)
		}
	}
}

// Eviction leaves the comparison unknown: no fallback to anything else.
func TestCompareEvictionUnknown(t *testing.T) {
	s := newCompareStore()
	now := int64(time.Hour)
	feed(s, 1, "a:1", now, 100)
	feed(s, 2, "a:1", now, 50)
	if p := s.pair(cgrp, netx.TCP, netx.V4, cnode(1), cnode(2), target{text: "a:1"}, true, now, noCut, false); p.basis != basisExact || !p.m[cmpResponse].known {
		t.Fatalf("pair %+v", p)
	}
	for i := range CompareCells {
		s.add(ckey(3, fmt.Sprintf("f%d:1", i)), int64(BlockWidth), cmpResponse, now, 1, 1, true)
	}
	if p := s.pair(cgrp, netx.TCP, netx.V4, cnode(1), cnode(2), target{text: "a:1"}, true, now, noCut, false); p.basis != basisNone || p.m[cmpResponse].known {
		t.Fatalf("after eviction: %+v", p)
	}
}

// A refused admission stores nothing.
func TestCompareAdmissionRefused(t *testing.T) {
	s := newCompareStore()
	s.add(ckey(1, "a:1"), int64(BlockWidth), cmpResponse, 1e9, 1, 1, false)
	if n, _ := s.size(); n != 0 {
		t.Fatalf("a refused cell was stored: %d", n)
	}
}

// A node-scoped failure fences every comparison cell of the node; a
// target-scoped one only its target's.
func TestCompareFence(t *testing.T) {
	s := newCompareStore()
	feed(s, 1, "a:1", 1e9, 1)
	feed(s, 1, "b:1", 1e9, 1)
	s.fence(cgrp, netx.TCP, cnode(1), netx.V4, &target{text: "a:1"})
	if n, _ := s.size(); n != 1 {
		t.Fatalf("target fence left %d cells", n)
	}
	s.fence(cgrp, netx.TCP, cnode(1), netx.V4, nil)
	if n, _ := s.size(); n != 0 {
		t.Fatalf("node fence left %d cells", n)
	}
}

func TestProbeWidth(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want time.Duration
	}{{-1, BlockWidth}, {0, 0}, {5 * time.Second, BlockWidth}, {30 * time.Second, time.Minute}, {time.Duration(1 << 62), 0}} {
		if got := time.Duration(probeWidth(c.d)); got != c.want {
			t.Errorf("probeWidth(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

// The hold margin grows with the incumbent's support to HoldMargin and
// no further.
func TestHoldMargin(t *testing.T) {
	if holdMargin(0) != 0 || holdMargin(HoldSupport/2) != HoldMargin/2 || holdMargin(100) != HoldMargin || HoldMargin > 0.005 {
		t.Fatalf("margins %v %v %v", holdMargin(0), holdMargin(HoldSupport/2), holdMargin(100))
	}
}

// Goodput windows: 1–10 s, 64 KiB a direction, bidirectional progress
// and a response.
func TestGoodputWindows(t *testing.T) {
	s := int64(time.Second)
	var w windows
	w.responded = true
	w.progress(1*s, 1, 0)
	if w.progress(1*s+s/2, 1<<20, 1<<20) {
		t.Fatal("a half-second window closed")
	}
	if !w.progress(3*s, 0, 1) || w.upBps != float64(1<<20)/2 || w.downBps != float64(1<<20+1)/2 {
		t.Fatalf("window: up %v down %v", w.upBps, w.downBps)
	}
	if w.progress(15*s, 1<<20, 1<<20) {
		t.Fatal("a window spanning 12 s of idle measured")
	}
	if !w.progress(16*s, WindowBytes, 100) || w.upBps == 0 || w.downBps != 0 {
		t.Fatalf("64 KiB up and 100 B down: up %v down %v", w.upBps, w.downBps)
	}
	var u windows // no response: nothing measured
	u.progress(1*s, 1, 1)
	if u.progress(3*s, 1<<20, 1<<20) {
		t.Fatal("a window without a response measured")
	}
}
