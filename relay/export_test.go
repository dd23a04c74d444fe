package relay

import "time"

// SetUnsignalledIdle sets the idle window after an unsignalled end for a
// test and returns the restore.
func SetUnsignalledIdle(d time.Duration) (restore func()) {
	old := unsignalledIdle
	unsignalledIdle = d
	return func() { unsignalledIdle = old }
}
