//go:build !race

package proxytest

// RaceEnabled: see race.go.
const RaceEnabled = false
