package main

import (
	"errors"
	"testing"
	"time"
)

func TestRecovery(t *testing.T) {
	kill := time.Unix(1000, 0)
	at := func(ms int) time.Time { return kill.Add(time.Duration(ms) * time.Millisecond) }
	fail := errors.New("socks reply: code 5")
	r := &recovery{survivor: "b", steady: 100 * time.Millisecond, killAt: kill}
	flows := []struct {
		f    flowRec
		done bool
	}{
		{flowRec{end: at(1), err: fail}, false},
		{flowRec{end: at(50), up: "b"}, false},
		{flowRec{end: at(100), err: fail}, false}, // breaks the run
		{flowRec{end: at(150), up: "b"}, false},   // the lasting run starts here
		{flowRec{end: at(200), up: "b"}, false},
		{flowRec{end: at(250), up: "b"}, true},
	}
	for i, c := range flows {
		if got := r.add(c.f); got != c.done {
			t.Fatalf("flow %d: done %v, want %v", i+1, got, c.done)
		}
	}
	if r.failed != 2 || r.flows != 6 || r.runFlow != 4 || !r.runStart.Equal(at(150)) || r.firstErr != fail.Error() {
		t.Fatalf("got failed %d flows %d runFlow %d runStart %v firstErr %q", r.failed, r.flows, r.runFlow, r.runStart.Sub(kill), r.firstErr)
	}
}

func TestMedian(t *testing.T) {
	if got := median([]int{5, 1, 3}); got != 3 {
		t.Fatalf("odd: %d", got)
	}
	if got := median([]int{4, 1, 3, 2}); got != 2 {
		t.Fatalf("even: %d", got)
	}
	if got := median([]time.Duration{3, 1}); got != 2 {
		t.Fatalf("durations: %d", got)
	}
	if got := median[int](nil); got != 0 {
		t.Fatalf("empty: %d", got)
	}
}
