//go:build race

package socks

// raceEnabled: under the race detector sync.Pool drops buffers at random
// and the detector allocates on its own, so allocation counts mean nothing.
const raceEnabled = true
