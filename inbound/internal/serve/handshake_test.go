package serve

import (
	"log/slog"
	"testing"
	"time"
)

// Past its bound a handshake is refused; the refusals are counted and
// logged at most once per interval; a slot freed is taken again.
func TestHandshakesBound(t *testing.T) {
	rec := &records{}
	h := NewHandshakes(time.Minute, 2, slog.New(rec))
	before := time.Now()
	a, b := h.Begin("a"), h.Begin("b")
	if a == nil || b == nil {
		t.Fatal("a handshake within the bound was refused")
	}
	if a.Deadline.Before(before.Add(time.Minute)) || a.Deadline.After(time.Now().Add(time.Minute)) {
		t.Fatalf("deadline %v is not a minute from the start", a.Deadline)
	}
	for range 5 {
		if h.Begin("c") != nil {
			t.Fatal("a handshake past the bound was admitted")
		}
	}
	if h.Refused() != 5 || h.InHandshake() != 2 {
		t.Fatalf("refused %d, in handshake %d", h.Refused(), h.InHandshake())
	}
	warns := rec.at(slog.LevelWarn)
	if len(warns) != 1 || warns[0]["limit"] != "2" || warns[0]["closed"] != "1" {
		t.Fatalf("warn lines %v; want one naming the limit", warns)
	}
	a.Done()
	a.Done() // a second Done frees nothing more
	var none *Handshake
	none.Done()
	if h.InHandshake() != 1 {
		t.Fatalf("in handshake %d after one Done", h.InHandshake())
	}
	if c := h.Begin("c"); c == nil {
		t.Fatal("the freed slot was not taken")
	}
	if h.Begin("d") != nil {
		t.Fatal("a second Done freed a second slot")
	}
}

func TestHandshakesDefaults(t *testing.T) {
	h := NewHandshakes(0, 0, nil)
	if h.timeout != DefaultHandshakeTimeout || h.limit != DefaultMaxHandshakes {
		t.Fatalf("defaults %v, %d", h.timeout, h.limit)
	}
}
