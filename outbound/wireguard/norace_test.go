//go:build !race

package wireguard

const raceEnabled = false
