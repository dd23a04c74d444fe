package fanout

import "time"

// Settle waits until every open started so far has ended: opened and
// flushed, or failed and logged. Call it from the goroutine that sent.
func (l *Link) Settle() { l.opens.Wait() }

// SetReplyTimeout shortens the reply deadline of Score reports for one
// test.
func SetReplyTimeout(d time.Duration) (restore func()) {
	old := replyTimeout
	replyTimeout = d
	return func() { replyTimeout = old }
}

// SetClock replaces the clock of the open backoff.
func (l *Link) SetClock(now func() time.Time) {
	l.mu.Lock()
	l.now = now
	l.mu.Unlock()
}
