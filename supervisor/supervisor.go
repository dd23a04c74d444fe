// Package supervisor runs a spec and applies new ones: each apply plans what
// to reuse, build and drain, prepares everything new without opening a
// socket, then commits by publishing one new routing plane.
package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/balancer"
	"switchyard/group"
	"switchyard/group/score"
	"switchyard/health"
	"switchyard/internal/pressure"
	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/relay"
	"switchyard/spec"
	"switchyard/store"
	"switchyard/track"
	"switchyard/warm"
)

// Options are the process-level settings a supervisor is started with.
type Options struct {
	Logger *slog.Logger
	// SocketHook, when set, sees every outbound socket and may refuse it.
	SocketHook func(netx.SocketInfo) error
	// Resolver resolves names; nil is the system resolver.
	Resolver netx.Resolver
	// Gate is the process-wide dial admission gate every generation shares;
	// nil is netx.ProcessGate().
	Gate *netx.Gate
	// GroupConnectivity, when set, hears every change of a group's
	// connectivity: for each health domain and address family, whether
	// any leaf the group can reach is alive there (a group with a single
	// leaf and no final reads alive on TCP, since its flows still go
	// there). A reload first reports every group of the old or new layout
	// alive, then the new layout exactly. It is called without any lock
	// held and must not block for long; it is the hook a datapath that
	// admits traffic by group (a TUN or eBPF front end) publishes from.
	GroupConnectivity func(group string, d health.Domain, f netx.Family, alive bool)
	// Store keeps what survives a restart: selector choices and the last
	// real delay of each node. nil keeps nothing. The caller opens it and
	// closes it after Close.
	Store *store.Store
	// FlowEnded, when set, hears how every relayed TCP flow ended (the
	// relay's classification, relay.End) with the flow's tracked meta, its
	// selection chain included: where health learns from real traffic. It
	// is called once per flow, on the relay's goroutine, after both conns
	// closed; it must not block. A flow whose setup failed after its dial
	// (before any relay) reports nothing.
	FlowEnded func(track.Meta, relay.End)
	// Metrics, when set, is fed by the supervisor (metrics.go): it reads
	// the supervisor's snapshots at scrape time and hears its events.
	Metrics *metrics.Metrics

	// clock, in tests, is the health engine's clock.
	clock health.Clock

	// wrap, in tests, wraps each outbound the supervisor builds.
	wrap func(spec.Outbound, outbound.Outbound) outbound.Outbound
	// beatPeriod, in tests, is the carrier-pressure heartbeat's period
	// (0: pressure.HeartbeatPeriod); pressureFeed hears the hints
	// instead of the Score engine.
	beatPeriod   time.Duration
	pressureFeed pressureFeed
}

// Supervisor owns the running state. Apply and Close are serialised; flows
// never take its locks: they load the plane from the cell.
type Supervisor struct {
	log     *slog.Logger
	opts    Options
	cell    plane.Cell
	tracker *track.Tracker
	conn    *connector
	socket  spec.Socket // fixed for the supervisor's lifetime
	gate    *netx.Gate  // the process's dial admission gate

	ctx    context.Context // parent of every probe; cancelled by Close
	cancel context.CancelFunc

	// groups is the published group manager (nil without groups). A
	// reload swaps it with the plane, under publish.
	groups    atomic.Pointer[group.Manager]
	publishMu sync.Mutex // serializes a reload's publication with group writes' loads
	// score is the process's Score engine (score.go): every generation's
	// Score groups rank with it.
	score *score.Engine
	// engine is the running health engine; healthSpec the [health] it was
	// made for (guarded by mu).
	engine     atomic.Pointer[health.Engine]
	healthSpec spec.Health
	bg         sync.WaitGroup // the network watcher and the delay saver
	// nodeIDs is each outbound tag's node identity in the published state.
	nodeIDs atomic.Pointer[map[string]health.NodeID]
	// listening is each bound inbound's address, by tag (listening.go).
	listening atomic.Pointer[map[string]net.Addr]
	// balancerPub is each balancer of the published state, by tag.
	balancerPub atomic.Pointer[map[string]*balancer.Balancer]
	// dnsCur is the DNS runtime in force (nil without [dns]), for readers;
	// dnsRT is the same under mu, dnsPrev the one it replaced (closed at
	// the next replacement, once the outbounds that held it have had a
	// reload's time to drain), dnsVersion the interception target's.
	dnsCur     atomic.Pointer[dnsRuntime]
	dnsRT      *dnsRuntime
	dnsPrev    *dnsRuntime
	dnsVersion uint32
	// modes is the routing mode every published plane reads (mode.go).
	modes modes
	// warm is the warm-up over the published generation (warm.go).
	warm *warm.Manager
	// beat is the process's one carrier-pressure heartbeat (pressure.go),
	// started with the first Score leaf's runtime; guarded by mu.
	beat *pressure.Beat

	mu       sync.Mutex // guards everything below; held by Apply and Close
	cur      *state
	inbounds map[string]*listener
	tuns     map[string]*tunRun // the tun inbounds (tuns.go)
	retired  []server           // servers of changed or removed inbounds kept under drain = keep
	stopped  []*listener        // listeners of moved or removed inbounds; Close waits for them
	started  bool
	closed   bool
}

// Check builds everything s describes without opening a socket or starting
// a probe.
func Check(s *spec.Spec) error {
	deps, err := dependencies(s, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if s.DNS != nil {
		// The DNS service is built as a start builds it (no socket opens
		// before an exchange), so that a dns outbound checks as it runs.
		sv := &Supervisor{log: slog.New(slog.DiscardHandler), socket: s.Socket}
		rt, err := sv.buildDNS(s)
		if err != nil {
			return err
		}
		defer rt.close()
		deps = rt.withDNS(deps)
	}
	p, err := prepare(nil, s, deps)
	if err != nil {
		return err
	}
	p.discard()
	for _, in := range listenerInbounds(s.Inbounds) {
		if _, err := newServer(in, nil, slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
	}
	return nil
}

// New builds the outbounds, balancers and plane of s and publishes the
// plane. It opens no socket; Start binds the inbounds.
func New(s *spec.Spec, opts Options) (*Supervisor, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv := &Supervisor{
		log:      log,
		opts:     opts,
		tracker:  track.New(),
		socket:   s.Socket,
		gate:     opts.Gate,
		ctx:      ctx,
		cancel:   cancel,
		inbounds: map[string]*listener{},
		tuns:     map[string]*tunRun{},
		warm:     warm.New(warm.Options{Clock: opts.clock, Log: log.With("component", "warm")}),
	}
	if sv.gate == nil {
		sv.gate = netx.ProcessGate()
	}
	sv.score = score.NewEngine(sv.scoreClock())
	sv.conn = &connector{cell: &sv.cell, tracker: sv.tracker, log: log.With("component", "connector"), ended: opts.FlowEnded,
		health: healthReports{engine: sv.engine.Load}, metrics: dialMetrics{opts.Metrics}}
	deps, err := sv.deps(s)
	if err != nil {
		cancel()
		return nil, err
	}
	rt, err := sv.dnsFor(s)
	if err != nil {
		cancel()
		return nil, err
	}
	deps = rt.withDNS(deps)
	eng := sv.newEngine(s.Health)
	p, err := prepareWith(nil, s, deps, opts.wrap, sv.groupEnv(eng))
	if err != nil {
		rt.close()
		cancel()
		return nil, err
	}
	rt.attach(p.plane)
	sv.dnsRT = rt
	sv.dnsCur.Store(rt)
	sv.admit(p, s)
	sv.configureUsers(s)
	sv.restoreChoices(p.next.groups)
	sv.startMode(s, p.plane)
	sv.engine.Store(eng)
	sv.healthSpec = s.Health
	sv.syncHealth(eng, p.next)
	sv.syncMetrics(p.next)
	sv.publish(nil, p)
	eng.SyncActivity(activities(p.next))
	sv.syncWarm(p.next, p.plane)
	sv.syncPressure(nil, p.next)
	sv.cur = p.next
	sv.attachMetrics()
	return sv, nil
}

// deps is what outbounds of s are built with, under the socket policy the
// supervisor started with.
func (sv *Supervisor) deps(s *spec.Spec) (outbound.Deps, error) {
	fixed := *s
	fixed.Socket = sv.socket
	d, err := dependencies(&fixed, sv.opts.SocketHook, sv.opts.Resolver, sv.log)
	if err != nil {
		return d, err
	}
	if d.Dialer != nil {
		d.Dialer.Gate = sv.gate
	}
	if rt := sv.dnsRT; rt != nil && spec.Equal(rt.spec, s.DNS) {
		d = rt.withDNS(d)
	}
	return d, nil
}

// admit gives the prepared generation its own dial admission, clamped to
// the process gate every generation shares.
func (sv *Supervisor) admit(p *prepared, s *spec.Spec) {
	p.plane.Admission = netx.NewAdmission(sv.gate, s.Dial.MaxConcurrentDials)
	sv.observeAdmission(p.plane.Admission)
}

// Admission reads the dial admission counts: the current generation's and
// the process gate's (shared with generations still draining).
func (sv *Supervisor) Admission() (generation, process netx.Stats) {
	p := sv.cell.Load()
	if p.Admission != nil {
		generation = p.Admission.Stats()
	}
	return generation, sv.gate.Stats()
}

// Tracker is the flow table.
func (sv *Supervisor) Tracker() *track.Tracker { return sv.tracker }

// Plane is the routing plane now in force.
func (sv *Supervisor) Plane() *plane.Plane { return sv.cell.Load() }

// Start binds every inbound, starts the balancers' probes and logs
// "switchyard ready" with the listen addresses.
func (sv *Supervisor) Start() error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed || sv.started {
		return net.ErrClosed
	}
	bound, err := sv.bindAll(listenerInbounds(sv.cur.spec.Inbounds))
	if err != nil {
		return err
	}
	if err := sv.startTUNs(sv.cur.spec.Inbounds); err != nil {
		for _, l := range bound {
			l.close()
		}
		return err
	}
	for tag, l := range bound {
		sv.inbounds[tag] = l
		l.run()
	}
	sv.publishListening()
	sv.startProbes(sv.cur)
	sv.startHealth()
	sv.warm.Start()
	sv.started = true
	attrs := make([]any, 0, len(sv.cur.spec.Inbounds))
	for _, in := range sv.cur.spec.Inbounds {
		if in.TUN != nil {
			attrs = append(attrs, slog.String(in.Tag, "tun:"+sv.tunDevice(in.Tag)))
			continue
		}
		attrs = append(attrs, slog.String(in.Tag, sv.inbounds[in.Tag].addr().String()))
	}
	sv.log.Info("switchyard ready", attrs...)
	return nil
}

// Addr returns the bound address of the inbound tagged tag, or nil.
func (sv *Supervisor) Addr(tag string) net.Addr {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if l, ok := sv.inbounds[tag]; ok {
		return l.addr()
	}
	return nil
}

// startProbes starts probing every balancer of st that is not probing yet.
func (sv *Supervisor) startProbes(st *state) {
	deps, err := sv.deps(st.spec)
	if err != nil {
		return // the spec was built with the same deps: cannot fail here
	}
	for _, b := range st.balancers {
		if b.probing {
			continue
		}
		b.probing = true
		b.bal.StartProbes(sv.ctx, b.spec.ProbeInterval, b.spec.ProbeTimeout, deps.Servers, deps.Dialer)
	}
}

// Close stops accepting, stops every probe, closes every flow and waits for
// what the supervisor started.
func (sv *Supervisor) Close() error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return nil
	}
	sv.closed = true
	sv.cancel()
	sv.warm.Close()
	sv.detachMetrics()
	var errs []error
	for _, l := range sv.inbounds {
		errs = append(errs, l.close())
	}
	errs = append(errs, sv.closeTUNs())
	for _, s := range sv.retired {
		errs = append(errs, s.Close())
	}
	sv.retired = nil
	for _, l := range sv.stopped {
		l.wg.Wait()
	}
	sv.stopped = nil
	for _, b := range sv.cur.balancers {
		b.bal.Stop()
	}
	if sv.cur.groups != nil {
		sv.cur.groups.Close()
	}
	if e := sv.engine.Load(); e != nil {
		e.Stop()
	}
	sv.closePressure()
	sv.bg.Wait()
	sv.dnsRT.close()
	if sv.dnsPrev != sv.dnsRT {
		sv.dnsPrev.close()
	}
	for _, t := range sv.cell.Load().Targets {
		t.CloseFlows()
		if !t.IsChooser() {
			t.Retire()
		}
	}
	return errors.Join(errs...)
}
