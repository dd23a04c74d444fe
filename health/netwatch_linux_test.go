package health_test

import (
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"switchyard/health"
)

// newNetns creates a network namespace of the test's own, leaving every
// thread of the process in the one it was in.
func newNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	type result struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, whatever
		// namespace it is left in.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			c <- result{err: err}
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			c <- result{err: err}
			return
		}
		if err := netns.Set(orig); err != nil {
			ns.Close()
			c <- result{err: err}
			return
		}
		c <- result{ns: ns}
	}()
	r := <-c
	if r.err != nil {
		t.Fatalf("new network namespace: %v", r.err)
	}
	t.Cleanup(func() { r.ns.Close() })
	return r.ns
}

// WatchNetwork notifies link, address and route changes, one notification
// per burst within the debounce.
func TestWatchNetwork(t *testing.T) {
	ns := newNetns(t)
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)

	const debounce = 100 * time.Millisecond
	var count atomic.Int32
	notified := make(chan struct{}, 16)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- health.WatchNetworkIn(ctx, &ns, debounce, func() {
			count.Add(1)
			notified <- struct{}{}
		}, func() { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("WatchNetwork: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("WatchNetwork: %v", err)
	}
	wait := func(what string, want int32) {
		t.Helper()
		select {
		case <-notified:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notification", what)
		}
		time.Sleep(3 * debounce)
		if got := count.Load(); got != want {
			t.Fatalf("%s: %d notifications, want %d", what, got, want)
		}
	}

	// A burst: links added and one brought up, an address on it (and the
	// routes the kernel adds with it): one notification.
	// A veth pair: dummy links need a module not every kernel has.
	link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "swy-test0"}, PeerName: "swy-test1"}
	if err := nl.LinkAdd(link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nl.LinkDel(link) })
	if err := nl.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr("192.0.2.1/24")
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	wait("link, address", 1)

	// A route alone.
	_, dst, _ := net.ParseCIDR("198.51.100.0/24")
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Gw: net.ParseIP("192.0.2.254")}); err != nil {
		t.Fatal(err)
	}
	wait("route", 2)

	// An address removed.
	if err := nl.AddrDel(link, addr); err != nil {
		t.Fatal(err)
	}
	wait("address removed", 3)
}

// WatchNetwork returns nil when its context ends.
func TestWatchNetworkEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- health.WatchNetwork(ctx, func() {}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchNetwork did not end with its context")
	}
}
