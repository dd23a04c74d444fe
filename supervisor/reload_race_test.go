package supervisor

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// closable fails every dial once closed, as a gRPC pool, a Hysteria 2 slot
// or a WireGuard tunnel does once its version is released. Each dial takes
// a little while, so that reloads land while dials run.
type closable struct {
	inner  outbound.Outbound
	closed atomic.Bool
}

var errClosedOutbound = errors.New("dial on a closed outbound")

func (c *closable) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if c.closed.Load() {
		return nil, errClosedOutbound
	}
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	if c.closed.Load() {
		return nil, errClosedOutbound
	}
	return c.inner.DialStream(ctx, f)
}

func (c *closable) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if c.closed.Load() {
		return nil, errClosedOutbound
	}
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	if c.closed.Load() {
		return nil, errClosedOutbound
	}
	return c.inner.DialPacket(ctx, f)
}

// CarriesUDP is the wrapped outbound's (outbound.Networks).
func (c *closable) CarriesUDP() bool { return outbound.CarriesUDP(c.inner) }

// Purge passes on to the wrapped outbound when it keeps connections for
// reuse (outbound.Purger).
func (c *closable) Purge() {
	if p, ok := c.inner.(outbound.Purger); ok {
		p.Purge()
	}
}

func (c *closable) Close() error {
	c.closed.Store(true)
	return nil
}

// reloadSpec is one of the two configurations the reload tests alternate:
// they differ in the direct outbound, which every flow routes to.
func reloadSpec(i int, drain spec.Drain) *spec.Spec {
	s := baseSpec()
	s.Reload.Drain = drain
	if i%2 == 1 {
		s.Outbounds[0].AddressFamily = "prefer_ipv4"
	}
	return s
}

// runReloading runs the first configuration with every outbound closable.
func runReloading(t *testing.T, drain spec.Drain) *Supervisor {
	wrap := func(_ spec.Outbound, o outbound.Outbound) outbound.Outbound { return &closable{inner: o} }
	sv, _ := run(t, reloadSpec(0, drain), Options{wrap: wrap})
	return sv
}

// reload100 applies the two configurations in turn, 100 times, a few
// milliseconds apart.
func reload100(t *testing.T, sv *Supervisor, drain spec.Drain) {
	for i := 1; i <= 100; i++ {
		if err := sv.Apply(reloadSpec(i, drain)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
	}
}

// Dials in a tight loop while 100 reloads alternate two configurations that
// change the outbound they route to: no dial fails because a reload
// happened, whether the old version's flows are kept or closed.
func TestNoDialFailsBecauseOfAReload(t *testing.T) {
	for _, drain := range []spec.Drain{spec.DrainKeep, spec.DrainClose} {
		t.Run(string(drain), func(t *testing.T) {
			sv := runReloading(t, drain)
			dst, err := netx.ParseAddr(tcpEcho(t))
			if err != nil {
				t.Fatal(err)
			}
			flow := netx.Flow{Network: netx.TCP, Dst: dst, Inbound: "socks-in"}
			var (
				stop         atomic.Bool
				dials, fails atomic.Int64
				firstErr     atomic.Value
				wg           sync.WaitGroup
			)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						c, err := sv.conn.ConnectStream(context.Background(), flow)
						dials.Add(1)
						if err != nil {
							fails.Add(1)
							firstErr.CompareAndSwap(nil, err)
							continue
						}
						c.Close()
					}
				}()
			}
			reload100(t, sv, drain)
			stop.Store(true)
			wg.Wait()
			if n := fails.Load(); n > 0 {
				t.Fatalf("%d of %d dials failed across 100 reloads; first: %v", n, dials.Load(), firstErr.Load())
			}
			if dials.Load() < 200 {
				t.Fatalf("only %d dials ran", dials.Load())
			}
		})
	}
}

// Four associations send in a tight loop, each packet waiting for its echo,
// while 100 reloads alternate two configurations that change the outbound
// their packets route to: no packet is dropped because a sub-link's open was
// overtaken by a reload (its version retired before the open began, or
// drained while it ran); with drain = keep every packet is answered too.
// (With drain = close a reply to a packet sent just before a reload is lost
// with the old version's sub-link, as that policy says.)
func TestNoDatagramIsLostToAReload(t *testing.T) {
	for _, drain := range []spec.Drain{spec.DrainKeep, spec.DrainClose} {
		t.Run(string(drain), func(t *testing.T) {
			sv := runReloading(t, drain)
			echo := udpEcho(t)
			// Under drain = close a reply can be lost with its sub-link:
			// the sender moves on sooner.
			wait := 300 * time.Millisecond
			if drain == spec.DrainClose {
				wait = 20 * time.Millisecond
			}
			to := netx.AddrFromAddrPort(echo.LocalAddr().(*net.UDPAddr).AddrPort())
			var (
				stop                atomic.Bool
				sent, lost, dropped atomic.Int64
				wg                  sync.WaitGroup
			)
			for a := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					link := sv.conn.OpenAssociation(netx.Flow{Inbound: "socks-in", Src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(5000+a))})
					replies := make(chan struct{})
					go func() {
						defer close(replies)
						buf := make([]byte, 64)
						for {
							if _, _, err := link.ReadPacket(buf); err != nil {
								return
							}
							replies <- struct{}{}
						}
					}()
					for !stop.Load() {
						link.WritePacket([]byte("ping"), to)
						sent.Add(1)
						select {
						case <-replies:
						case <-time.After(wait):
							lost.Add(1)
						}
					}
					dropped.Add(int64(link.(interface{ Dropped() uint64 }).Dropped()))
					link.Close()
					for range replies {
					}
				}()
			}
			reload100(t, sv, drain)
			stop.Store(true)
			wg.Wait()
			if d := dropped.Load(); d > 0 {
				t.Fatalf("%d of %d datagrams dropped across 100 reloads", d, sent.Load())
			}
			if drain == spec.DrainKeep && lost.Load() > 0 {
				t.Fatalf("%d of %d datagrams went unanswered across 100 reloads", lost.Load(), sent.Load())
			}
			if sent.Load() < 40 {
				t.Fatalf("only %d datagrams sent", sent.Load())
			}
		})
	}
}
