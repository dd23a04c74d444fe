//go:build !linux

package tun

// Defaults of Route (see route_linux.go).
const (
	DefaultTable    = 2022
	DefaultPriority = 9000
)
