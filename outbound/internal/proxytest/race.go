//go:build race

package proxytest

// RaceEnabled: the race detector allocates on its own, and the buffer pools
// drop some of what they are given under it, so allocation counts mean
// nothing then.
const RaceEnabled = true
