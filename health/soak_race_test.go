//go:build race

package health_test

import "time"

// soakSpan is the simulated time of TestSoak under the race detector,
// which makes every probe many times slower.
const soakSpan = 2 * time.Hour
