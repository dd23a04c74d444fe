//go:build !linux

package netx

import (
	"errors"
	"syscall"
)

// Poller is Linux's (poller_linux.go): elsewhere NewPoller fails and every
// reader keeps a goroutine of its own.
type Poller struct{}

// Watch is a descriptor a Poller watches.
type Watch struct{}

// ErrNoPoller is NewPoller's error on systems without one.
var ErrNoPoller = errors.New("no poller on this system")

func NewPoller() (*Poller, error)                                          { return nil, ErrNoPoller }
func (p *Poller) Close() error                                             { return nil }
func (p *Poller) Watch(syscall.RawConn, func([]byte) bool) (*Watch, error) { return nil, ErrNoPoller }
func (w *Watch) Kick()                                                     {}
func (w *Watch) Stop()                                                     {}
