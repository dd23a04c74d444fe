//go:build !race

package socks

const raceEnabled = false
