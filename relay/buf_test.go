package relay

import "testing"

// A direction reads in the small buffer until a read fills it, in the large
// one while reads bring more than the small one holds, and gives the large
// one back after a read of little.
func TestCopyBufFit(t *testing.T) {
	var c copyBuf
	c.get(false)
	defer c.put()
	steps := []struct {
		n    int
		want int
	}{
		{100, smallSize},         // little: stays small
		{smallSize, bufSize},     // filled the small one
		{bufSize, bufSize},       // bulk
		{smallSize + 1, bufSize}, // still more than the small one holds
		{smallSize, smallSize},   // little again: the large one goes back
		{1, smallSize},
	}
	for i, s := range steps {
		c.fit(s.n)
		if got := len(*c.b); got != s.want {
			t.Fatalf("step %d: after a read of %d, a buffer of %d, want %d", i, s.n, got, s.want)
		}
	}
	c.put()
	if c.b != nil {
		t.Fatal("put kept the buffer")
	}
	c.put() // a second put is a no-op
	c.get(false)
}

// Steady state: swapping buffers back and forth allocates nothing.
func TestCopyBufFitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own, and drops pooled items")
	}
	var c copyBuf
	c.get(false)
	defer c.put()
	for range 4 { // warm both pools
		c.fit(smallSize)
		c.fit(smallSize)
	}
	if a := testing.AllocsPerRun(100, func() {
		c.fit(len(*c.b))
		c.fit(1)
	}); a != 0 {
		t.Fatalf("%v allocations per grow and shrink, want 0", a)
	}
}
