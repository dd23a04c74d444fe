// Package ping sends one ICMP echo request over an unprivileged ping socket
// (Linux: SOCK_DGRAM, IPPROTO_ICMP / IPPROTO_ICMPV6, allowed to the groups
// in net.ipv4.ping_group_range) under the process's socket policy, and
// returns the reply's data.
package ping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Options is the socket policy a ping socket gets.
type Options struct {
	Mark      uint32 // SO_MARK; 0 = unset
	Interface string // SO_BINDTODEVICE; "" = unset
}

// DefaultTimeout bounds an echo whose ctx has no deadline.
const DefaultTimeout = 10 * time.Second

var seq atomic.Uint32

// Echo sends an echo request carrying data to dst and waits for its reply
// (ctx's deadline, or DefaultTimeout), returning the reply's data.
func Echo(ctx context.Context, o Options, dst netip.Addr, data []byte) ([]byte, error) {
	dst = dst.Unmap()
	c, err := open(o, dst.Is6())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()

	n := uint16(seq.Add(1))
	var typ, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	proto := 1
	if dst.Is6() {
		typ, reply, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, 58
	}
	msg, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{Seq: int(n), Data: data}}).Marshal(nil)
	if err != nil {
		return nil, err
	}
	if _, err := c.WriteTo(msg, &net.UDPAddr{IP: dst.AsSlice()}); err != nil {
		return nil, fmt.Errorf("ping %s: %w", dst, err)
	}
	buf := make([]byte, 65536)
	for {
		k, from, err := c.ReadFrom(buf)
		if err != nil {
			return nil, fmt.Errorf("ping %s: %w", dst, err)
		}
		if a, ok := from.(*net.UDPAddr); !ok || !a.IP.Equal(dst.AsSlice()) {
			continue
		}
		m, err := icmp.ParseMessage(proto, buf[:k])
		if err != nil || m.Type != reply {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.Seq == int(n) {
			return e.Data, nil
		}
	}
}

// open makes a ping socket of dst's family under o.
func open(o Options, v6 bool) (net.PacketConn, error) {
	fam, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if v6 {
		fam, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("ping socket: %w (the process's group must be in net.ipv4.ping_group_range)", err)
		}
		return nil, fmt.Errorf("ping socket: %w", err)
	}
	// An ICMP error toward the socket (unreachable, prohibited) fails the
	// read at once instead of leaving it to time out.
	lvl, opt := unix.IPPROTO_IP, unix.IP_RECVERR
	if v6 {
		lvl, opt = unix.IPPROTO_IPV6, unix.IPV6_RECVERR
	}
	if err := unix.SetsockoptInt(fd, lvl, opt, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ping socket: RECVERR: %w", err)
	}
	if o.Mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(o.Mark)); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("ping socket: SO_MARK: %w", err)
		}
	}
	if o.Interface != "" {
		if err := unix.BindToDevice(fd, o.Interface); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("ping socket: SO_BINDTODEVICE %s: %w", o.Interface, err)
		}
	}
	f := os.NewFile(uintptr(fd), "ping")
	defer f.Close()
	return net.FilePacketConn(f)
}
