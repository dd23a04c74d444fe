//go:build !race

package shadowsocks

const raceEnabled = false
