//go:build !linux

package health

import "context"

// WatchNetwork watches nothing on this system: it waits for ctx to end and
// returns nil. (On Linux it calls notify after link, address and route
// changes.)
func WatchNetwork(ctx context.Context, notify func()) error {
	<-ctx.Done()
	return nil
}
