//go:build !linux

package socks

import (
	"errors"
	"net"
)

// hangups has no shared watcher here: each association waits on its
// control connection with a goroutine of its own.
type hangups struct{}

func newHangups() (*hangups, error) { return nil, errors.New("no hang-up watcher on this platform") }

func (h *hangups) watch(net.Conn, func()) func() { return nil }

func (h *hangups) close() {}
