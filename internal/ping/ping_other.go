//go:build !linux

// Package ping relays ICMP echo; it has ping sockets on Linux only.
package ping

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

type Options struct {
	Mark      uint32
	Interface string
}

const DefaultTimeout = 10 * time.Second

// Echo fails: ping sockets are Linux's.
func Echo(context.Context, Options, netip.Addr, []byte) ([]byte, error) {
	return nil, errors.New("ping sockets are available on Linux only")
}
