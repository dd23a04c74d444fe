package ratelog

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Limiter{Every: 10 * time.Second, Now: func() time.Time { return now }}
	type step struct {
		advance      time.Duration
		count, total int64
		due          bool
	}
	for i, s := range []step{
		{0, 1, 1, true},               // the first event is logged at once
		{time.Second, 0, 2, false},    // then counted
		{time.Second, 0, 3, false},    //
		{8 * time.Second, 3, 4, true}, // the next line reports the suppressed ones with itself
		{9 * time.Second, 0, 5, false},
		{time.Minute, 2, 6, true},
	} {
		now = now.Add(s.advance)
		count, total, due := l.Note()
		if count != s.count || total != s.total || due != s.due {
			t.Fatalf("step %d: Note() = %d, %d, %v; want %d, %d, %v", i, count, total, due, s.count, s.total, s.due)
		}
	}
	if l.Total() != 6 {
		t.Fatalf("Total() = %d", l.Total())
	}
}
