//go:build !race

package health_test

import "time"

// soakSpan is the simulated time of TestSoak: a day.
const soakSpan = 24 * time.Hour
