// Package netlab builds a delayed network path on this machine for the
// latency tests and benchmarks: a network namespace of its own, reached
// from the root namespace over one link whose every packet waits a fixed
// time in each direction, and helpers to run servers inside it.
//
// The delay is a netem qdisc ("tc qdisc add dev X root netem delay D") on
// both ends of a veth pair. Where the kernel is built without sch_netem
// (tc answers "Specified qdisc kind is unknown"), the link is a pair of TUN
// devices with a user-space copier that holds each packet for the same
// time (delayline.go): the same round trips, paid at the packet level.
// Path.Mode says which one a run got; nothing is skipped either way.
//
// Every address is inside 10.213.0.0/16, on the link only: the namespace
// side is a namespace this package made, the root side an address on the
// link's own device. Traffic goes nowhere else.
package netlab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// Path is one namespace and its delayed link.
type Path struct {
	NS       string        // the namespace's name (ip netns)
	HostAddr netip.Addr    // the root namespace's end of the link
	PeerAddr netip.Addr    // the namespace's end of the link
	Delay    time.Duration // added to every packet, each way
	Mode     string        // how the delay is made: "netem", or the delay line and why

	hostDev string
	line    *delayLine
}

// RTT is the round trip the link adds: the delay both ways.
func (p *Path) RTT() time.Duration { return 2 * p.Delay }

// ModeNetem is Path.Mode when netem qdiscs delay the link.
const ModeNetem = "netem"

// New makes a namespace with a unique name and a link to it that delays
// every packet by delay each way. It needs root and iproute2 (ip, tc).
// Close undoes all of it; on an error New has undone what it did.
func New(delay time.Duration) (_ *Path, err error) {
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("netlab needs iproute2's %s (scripts/test.sh installs iproute2): %w", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("netlab needs root: it creates a network namespace, links and qdiscs")
	}
	var id [3]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	p := &Path{
		NS:      fmt.Sprintf("sy-netem-%d-%s", os.Getpid(), tag),
		Delay:   delay,
		hostDev: "syh" + tag, // interface names have at most 15 bytes
	}
	peerDev := "syp" + tag
	if p.HostAddr, p.PeerAddr, err = freeSubnet(); err != nil {
		return nil, err
	}
	if err := run("ip", "netns", "add", p.NS); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := run("ip", "-n", p.NS, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	why, err := p.vethNetem(peerDev)
	if err != nil {
		return nil, err
	}
	if why != "" {
		if err := p.tunDelayLine(peerDev); err != nil {
			return nil, fmt.Errorf("%s; the user-space delay line instead: %w", why, err)
		}
		p.Mode = "user-space delay line over TUN (" + why + ")"
	}
	host := p.HostAddr.String() + "/30"
	peer := p.PeerAddr.String() + "/30"
	for _, c := range [][]string{
		{"ip", "addr", "add", host, "dev", p.hostDev},
		{"ip", "link", "set", p.hostDev, "up"},
		{"ip", "-n", p.NS, "addr", "add", peer, "dev", peerDev},
		{"ip", "-n", p.NS, "link", "set", peerDev, "up"},
	} {
		if err := run(c...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// vethNetem links the namespace with a veth pair and puts a netem qdisc on
// both ends. When the kernel has no netem it removes the pair again and
// returns why, for the delay line to take over.
func (p *Path) vethNetem(peerDev string) (noNetem string, err error) {
	if err := run("ip", "link", "add", p.hostDev, "type", "veth", "peer", "name", peerDev, "netns", p.NS); err != nil {
		return "", err
	}
	d := fmt.Sprintf("%dus", p.Delay.Microseconds())
	out, err := exec.Command("tc", "qdisc", "add", "dev", p.hostDev, "root", "netem", "delay", d).CombinedOutput()
	if err != nil {
		run("ip", "link", "del", p.hostDev) // takes the peer with it
		if bytes.Contains(out, []byte("qdisc kind is unknown")) {
			return fmt.Sprintf("this kernel (%s) has no sch_netem: tc said %q", kernelRelease(), strings.TrimSpace(string(out))), nil
		}
		return "", fmt.Errorf("tc qdisc add dev %s root netem delay %s: %v: %s", p.hostDev, d, err, out)
	}
	if err := run("ip", "netns", "exec", p.NS, "tc", "qdisc", "add", "dev", peerDev, "root", "netem", "delay", d); err != nil {
		return "", err
	}
	p.Mode = ModeNetem
	return "", nil
}

// tunDelayLine links the namespace with two TUN devices, one created in
// each namespace, and the copier between them.
func (p *Path) tunDelayLine(peerDev string) error {
	host, err := openTUN(p.hostDev)
	if err != nil {
		return err
	}
	var peer *os.File
	if err := p.Do(func() error {
		var err error
		peer, err = openTUN(peerDev)
		return err
	}); err != nil {
		host.Close()
		return err
	}
	p.line = startDelayLine(host, peer, p.Delay)
	return nil
}

// Close removes the link and the namespace. Processes still running in the
// namespace keep it alive until they exit: stop them first.
func (p *Path) Close() error {
	var errs []error
	if p.line != nil {
		p.line.close() // the TUN devices go with their descriptors
		p.line = nil
	} else if p.Mode == ModeNetem {
		if err := run("ip", "link", "del", p.hostDev); err != nil {
			errs = append(errs, err)
		}
	}
	if err := run("ip", "netns", "del", p.NS); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Command is a command to run inside the namespace (ip netns exec).
func (p *Path) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", p.NS, name}, args...)...)
}

// Do runs f on an OS thread that has entered the namespace, so the sockets
// f opens belong to it (and stay there, used from any thread). The thread
// is never handed back to the runtime: its goroutine ends locked, and the
// runtime ends the thread with it.
func (p *Path) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(p.NS)
		if err != nil {
			errc <- fmt.Errorf("opening namespace %s: %w", p.NS, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("entering namespace %s: %w", p.NS, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Listen opens a TCP listener inside the namespace on its end of the link.
func (p *Path) Listen() (net.Listener, error) {
	var ln net.Listener
	err := p.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(p.PeerAddr, 0).String())
		return err
	})
	return ln, err
}

// freeSubnet picks a /30 in 10.213.0.0/16 that no address of the root
// namespace is in, returning its two host addresses.
func freeSubnet() (host, peer netip.Addr, err error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return host, peer, err
	}
	taken := func(pfx netip.Prefix) bool {
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ones, _ := n.Mask.Size()
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			if netip.PrefixFrom(ip.Unmap(), ones).Masked().Overlaps(pfx) {
				return true
			}
		}
		return false
	}
	for range 100 {
		base := netip.AddrFrom4([4]byte{10, 213, byte(mrand.IntN(256)), byte(mrand.IntN(64) * 4)})
		if pfx := netip.PrefixFrom(base, 30); !taken(pfx) {
			return base.Next(), base.Next().Next(), nil
		}
	}
	return host, peer, errors.New("no free /30 in 10.213.0.0/16")
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown release"
	}
	return strings.TrimSpace(string(b))
}
