package health

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// path is one probe path of a node: TCP covers its TCP states, UDP its two
// UDP domains.
type path uint8

const (
	tcpPath path = iota
	udpPath
)

func (p path) domains() []Domain {
	if p == tcpPath {
		return Domains[:1]
	}
	return Domains[1:]
}

func (n *node) busyFlag(p path) *atomic.Bool {
	if p == tcpPath {
		return &n.tcpBusy
	}
	return &n.udpBusy
}

// parked reports whether the periodic cycle leaves path p of n to the
// recovery scheduler: a state of it is dead and none is observed alive.
func (n *node) parked(p path) bool {
	v := n.snap.Load()
	dead, alive := false, false
	for _, d := range p.domains() {
		for f := range v.st[d] {
			c := &v.st[d][f]
			dead = dead || !c.alive
			alive = alive || (c.observed && c.alive)
		}
	}
	return dead && !alive
}

// due reports whether a dead state of path p of n has its cooldown elapsed.
func (n *node) due(p path, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, d := range p.domains() {
		for f := range n.cells[d] {
			if n.cells[d][f].due(now) {
				return true
			}
		}
	}
	return false
}

// hasUDP reports whether path UDP of n is probed at all.
func (e *Engine) hasUDP(n *node) bool { return e.udp && n.meta.Load().udp }

// launch submits a probe of path p of n unless one is in flight.
func (e *Engine) launch(ctx context.Context, wg *sync.WaitGroup, n *node, p path) {
	flag := n.busyFlag(p)
	if !flag.CompareAndSwap(false, true) {
		return
	}
	if p == udpPath {
		e.submitUDP(ctx, wg, n, false, func() { flag.Store(false) })
		return
	}
	if !e.submit(ctx, wg, func(ctx context.Context) {
		defer flag.Store(false)
		e.probeTCP(ctx, n, false)
	}) {
		flag.Store(false)
	}
}

// launchURL submits a probe of check_url state u unless one is in flight.
func (e *Engine) launchURL(ctx context.Context, wg *sync.WaitGroup, u *urlEntry) {
	if !u.busy.CompareAndSwap(false, true) {
		return
	}
	if !e.submit(ctx, wg, func(ctx context.Context) {
		defer u.busy.Store(false)
		e.probeURL(ctx, u, false)
	}) {
		u.busy.Store(false)
	}
}

// cycle is the periodic pass: every awake node's paths, but those parked
// for the recovery scheduler, then the check_urls, whose set it replaces
// by what URLTargets returns now.
func (e *Engine) cycle(ctx context.Context) {
	now := e.clock.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, n := range *e.reg.Load() {
		if !e.awake(n.id, now.UnixNano()) {
			continue
		}
		if !n.parked(tcpPath) {
			e.launch(ctx, &wg, n, tcpPath)
		}
		if e.hasUDP(n) && !n.parked(udpPath) {
			e.launch(ctx, &wg, n, udpPath)
		}
	}
	for _, u := range e.refreshURLs() {
		if n := e.node(u.leafID()); n != nil && e.awake(n.id, now.UnixNano()) && !u.parked() {
			e.launchURL(ctx, &wg, u)
		}
	}
}

// recoveryPass is the recovery pass: the paths and check_urls of awake nodes
// with a dead state whose cooldown is due.
func (e *Engine) recoveryPass(ctx context.Context) {
	now := e.clock.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, n := range *e.reg.Load() {
		if !e.awake(n.id, now.UnixNano()) {
			continue
		}
		if n.due(tcpPath, now) {
			e.launch(ctx, &wg, n, tcpPath)
		}
		if e.hasUDP(n) && n.due(udpPath, now) {
			e.launch(ctx, &wg, n, udpPath)
		}
	}
	for _, u := range *e.urls.Load() {
		if n := e.node(u.leafID()); n != nil && e.awake(n.id, now.UnixNano()) && u.due(now) {
			e.launchURL(ctx, &wg, u)
		}
	}
}

// urgentPass probes what was asked for now: set's nodes, or everything.
func (e *Engine) urgentPass(ctx context.Context, set map[NodeID]urgentKind, all bool) {
	var wg sync.WaitGroup
	defer wg.Wait()
	reg := *e.reg.Load()
	if all {
		for _, n := range reg {
			set[n.id] = urgentFull
		}
	}
	for id, k := range set {
		n := reg[id]
		if n == nil {
			continue
		}
		if k&urgentTCP != 0 {
			e.launch(ctx, &wg, n, tcpPath)
		}
		if k&urgentRest != 0 && e.hasUDP(n) {
			e.launch(ctx, &wg, n, udpPath)
		}
	}
	for _, u := range *e.urls.Load() {
		if k := set[u.leafID()]; k&urgentRest != 0 && reg[u.leafID()] != nil {
			e.launchURL(ctx, &wg, u)
		}
	}
}
