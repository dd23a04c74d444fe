package healthtest

import (
	"testing"
	"time"
)

// Timers run from Advance in due order, each seeing its due time; a timer
// armed by a timer within the span runs too; a stopped one never runs.
func TestClock(t *testing.T) {
	c := NewClock(Epoch)
	var got []time.Duration
	at := func() { got = append(got, c.Now().Sub(Epoch)) }
	c.AfterFunc(3*time.Second, at)
	c.AfterFunc(time.Second, func() {
		at()
		c.AfterFunc(time.Second, at) // due at 2 s
	})
	stop := c.AfterFunc(2500*time.Millisecond, at)
	if !stop() || stop() {
		t.Fatal("stop reports wrongly")
	}
	c.AfterFunc(10*time.Second, at)
	c.Advance(5 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("ran at %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ran at %v, want %v", got, want)
		}
	}
	if c.Now() != Epoch.Add(5*time.Second) || c.Timers() != 1 {
		t.Errorf("now %v, %d timers", c.Now(), c.Timers())
	}
	// A zero duration runs at the next Advance, not from AfterFunc.
	ran := false
	c.AfterFunc(0, func() { ran = true })
	if ran {
		t.Fatal("ran from AfterFunc")
	}
	c.Advance(0)
	if !ran {
		t.Fatal("did not run from Advance(0)")
	}
	var zero Clock
	if !zero.Now().Equal(Epoch) {
		t.Errorf("zero clock at %v", zero.Now())
	}
}
