package health

import (
	"context"
	"time"
)

// Clock is the engine's source of time: the wall clock in production, a
// fake one in tests (package healthtest). Every timer of the engine, probe
// timeouts included, goes through it.
type Clock interface {
	// Now returns the current time. Sample times are Now's, so a real
	// clock gives real wall-clock history times.
	Now() time.Time
	// AfterFunc calls f once d has elapsed and returns a function that
	// cancels the call (reporting whether it did). f must not block: the
	// engine's only send to channels without waiting or cancel contexts.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// withTimeout bounds ctx by d on the engine's clock. The wall clock uses a
// real deadline, which dialers under the probe can see; another clock
// cancels ctx with context.DeadlineExceeded once d has elapsed on it.
func (e *Engine) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := e.clock.(realClock); ok {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := e.clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
