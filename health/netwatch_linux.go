package health

import (
	"context"
	"errors"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// WatchNetwork calls notify after link, address and route changes of the
// host's network namespace (typically Engine.NotifyNetworkChange), at most
// once per NetworkDebounce: the first change of a burst arms the debounce,
// the changes within it are absorbed, and notify runs when it ends. It
// runs until ctx ends, on the caller's goroutine, and returns nil then; it
// returns an error only when it cannot subscribe. A subscription the kernel
// ends (a receive buffer overrun loses changes) is notified as a change and
// subscribed again.
func WatchNetwork(ctx context.Context, notify func()) error {
	return watchNetwork(ctx, nil, NetworkDebounce, notify, nil)
}

// errSubscriptionEnded is a netlink subscription closed while watching.
var errSubscriptionEnded = errors.New("netlink subscription ended")

// watchNetwork watches namespace ns (nil: the current one); ready, when
// set, is called once the subscriptions are in place.
func watchNetwork(ctx context.Context, ns *netns.NsHandle, debounce time.Duration, notify, ready func()) error {
	for {
		err := watchOnce(ctx, ns, debounce, notify, ready)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, errSubscriptionEnded) {
			return err
		}
		notify() // changes may have been lost
		ready = nil
		t := time.NewTimer(debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watchOnce subscribes and watches until ctx ends or a subscription ends.
// Every subscription's goroutines have ended when it returns.
func watchOnce(ctx context.Context, ns *netns.NsHandle, debounce time.Duration, notify, ready func()) error {
	done := make(chan struct{})
	links := make(chan netlink.LinkUpdate, 16)
	addrs := make(chan netlink.AddrUpdate, 16)
	routes := make(chan netlink.RouteUpdate, 16)
	var drains []func()
	defer func() {
		close(done) // closes the sockets: each receiver closes its channel
		for _, drain := range drains {
			drain()
		}
	}()
	ignore := func(error) {} // parse errors skip a message; a fatal one closes the channel
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{Namespace: ns, ErrorCallback: ignore}); err != nil {
		return err
	}
	drains = append(drains, func() {
		for range links {
		}
	})
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{Namespace: ns, ErrorCallback: ignore}); err != nil {
		return err
	}
	drains = append(drains, func() {
		for range addrs {
		}
	})
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{Namespace: ns, ErrorCallback: ignore}); err != nil {
		return err
	}
	drains = append(drains, func() {
		for range routes {
		}
	})
	if ready != nil {
		ready()
	}
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	armed := false
	for {
		ok := true
		select {
		case <-ctx.Done():
			return nil
		case _, ok = <-links:
		case _, ok = <-addrs:
		case _, ok = <-routes:
		case <-timer.C:
			armed = false
			notify()
			continue
		}
		if !ok {
			return errSubscriptionEnded
		}
		if !armed {
			timer.Reset(debounce)
			armed = true
		}
	}
}
