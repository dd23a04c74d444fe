//go:build !linux

package tun

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"

	"switchyard/inbound"
)

// New refuses: the TUN inbound runs on Linux only.
func New(cfg Config, _ inbound.Connector, _ *slog.Logger) (*Inbound, error) {
	return nil, fmt.Errorf("tun %s: %w", cfg.Tag, errors.New("the tun inbound runs on Linux only, not on "+runtime.GOOS))
}
