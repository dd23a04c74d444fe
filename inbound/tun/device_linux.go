package tun

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"

	"switchyard/inbound"
)

// New creates the device cfg names, gives it its addresses and MTU, brings
// it up, installs auto_route's routes when asked and serves it. Without
// CAP_NET_ADMIN the error says so.
func New(cfg Config, conn inbound.Connector, log *slog.Logger) (*Inbound, error) {
	cfg.defaults()
	// strict_route blocks before the device exists; a failure here leaves
	// the blocking rules a predecessor left (they block, as before).
	var unblock func() error
	if cfg.Route != nil && cfg.Route.Strict {
		u, had, err := installStrict(cfg)
		if err != nil {
			return nil, fmt.Errorf("tun %s: strict_route: %w", cfg.Tag, capability(err))
		}
		unblock = u
		if had {
			unblock = nil
		}
		defer func() {
			if unblock != nil {
				unblock()
			}
		}()
	}
	dev, err := tun.CreateTUN(cfg.Name, cfg.MTU)
	if err != nil {
		return nil, fmt.Errorf("tun %s: creating device %s: %w", cfg.Tag, cfg.Name, capability(err))
	}
	if err := configure(dev, cfg); err != nil {
		dev.Close()
		return nil, fmt.Errorf("tun %s: device %s: %w", cfg.Tag, cfg.Name, capability(err))
	}
	in, err := run(cfg, dev, conn, log)
	if err != nil {
		return nil, err
	}
	if cfg.Route != nil {
		undo, err := installRoutes(cfg)
		if err != nil {
			in.Close()
			return nil, fmt.Errorf("tun %s: auto_route: %w", cfg.Tag, capability(err))
		}
		in.undo = undo
		if cfg.Route.Strict {
			in.unblock = func() error { return removeRules(cfg.Route) }
		}
	}
	unblock = nil
	return in, nil
}

// capability names CAP_NET_ADMIN in a refusal.
func capability(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w (the process needs CAP_NET_ADMIN: run as root or grant it, e.g. setcap cap_net_admin+ep)", err)
	}
	return err
}

// configure gives the device its addresses and brings it up.
func configure(dev tun.Device, cfg Config) error {
	name, err := dev.Name()
	if err != nil {
		return err
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	for _, p := range cfg.Addresses {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrReplace(link, a); err != nil {
			return fmt.Errorf("address %s: %w", p, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing it up: %w", err)
	}
	return nil
}
