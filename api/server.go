// Package api is the Clash-compatible HTTP controller: the REST and
// WebSocket endpoints dashboards read (proxies, groups, delay tests,
// connections, traffic, memory, configs), over the running supervisor.
//
// It reads published state only (the group manager's introspection, the
// health engine's states, the tracker's snapshots) and writes through the
// supervisor's own calls (SelectGroup, Tracker.Kill).
//
// The routing mode and the GLOBAL selector follow mihomo. GET /configs
// reports "mode" (rule, global or direct); PATCH /configs {"mode": ...}
// (any case) changes it at once for every flow routed after it, TCP and
// UDP packets alike, from every inbound; open TCP flows keep their route,
// as in mihomo, and a UDP association routes its next packets on the new
// mode (as after a reload) without its sub-links being closed. The DNS
// interception of port 53 comes first in every mode and fake addresses
// are still given back their names; in direct mode names are answered
// with their real addresses (a name sent direct gets no fake one). Rules
// that send to a block outbound (a block of port 53, of ads) hold in every
// mode, where mihomo's global and direct modes skip every rule: a mode
// switch must not leak what the file blocks. The DNS service's own
// through_proxy queries are routed flows and follow the mode too; a mode
// change empties the DNS cache, as sing-box's does. The mode is kept in the store; see supervisor/mode.go for how it and the
// file's [route] mode decide at start and on a reload (mihomo keeps no
// mode across a restart: the last word said wins here).
//
// GLOBAL is a real selector built with each plane over every group,
// balancer and outbound (in /proxies order), defaulting to [route].final;
// global mode routes to its choice. PUT /proxies/GLOBAL selects (kept in
// the store, apart from the groups' choices; no user tag may be GLOBAL)
// and interrupts no flow, as mihomo's GLOBAL does not. A reload keeps the
// choice while its member is the same node or group, else GLOBAL goes
// back to its default, logged.
//
// DELETE /proxies/{name} is mihomo's "unfix": PUT /proxies/{name} here
// writes Selectors only (mihomo's also fixes a URLTest or Fallback
// group's pick), so what a DELETE clears is a Selector's choice (and
// GLOBAL's): the group goes back to its configured default, else its
// first member, on both networks, the stored choice cleared and flows
// interrupted as a switch would; 204. A URLTest or Fallback (a group, or
// a failover balancer) is never fixed here, so `fixed` stays "" and a
// DELETE of one is 204 with nothing to clear, as mihomo answers for an
// unfixed one; any other proxy (LoadBalance, an outbound) is 400.
//
// A Score group shows as a URLTest: now is the scorer's readonly pick for
// a flow with no particular target (its aggregate TCP winner), PUT is
// refused as for a URLTest and DELETE has nothing to clear. Its counters
// are GET /switchyard/v1/stats/score, named by group, never by node or
// target.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/balancer"
	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/track"
)

// Backend is what the API reads and drives: the supervisor's exported
// methods (a *supervisor.Supervisor satisfies it).
type Backend interface {
	// Groups is the group manager in force; nil without groups.
	Groups() *group.Manager
	SelectGroup(tag, member string, networks ...netx.Network) (int, error)
	// Health is the health engine in force; nil when none runs.
	Health() *health.Engine
	NodeID(tag string) (health.NodeID, bool)
	Tracker() *track.Tracker
	// Mode is the routing mode in force; SetMode changes it at once for
	// the flows routed after it, and keeps it (see mode.go).
	Mode() plane.Mode
	SetMode(plane.Mode) error
	// Global is the GLOBAL selector of the plane in force; SelectGlobal
	// and ClearGlobal write its choice, kept across reloads and restarts.
	Global() *plane.Global
	SelectGlobal(member string) error
	ClearGlobal() error
	// ClearSelector drops a selector group's choice back to its default
	// (DELETE /proxies/{name}).
	ClearSelector(tag string, networks ...netx.Network) (int, error)
	// BalancerStatus is the balancer tag's current member and its
	// members' health.
	BalancerStatus(tag string) (balancer.Status, bool)
	// Listening is the address the inbound tag is bound to; nil when none.
	Listening(tag string) net.Addr
}

// Options are the API's settings.
type Options struct {
	// Secret is the bearer token; "" accepts requests without one, from
	// loopback Host names and same-machine origins only.
	Secret string
	// ExternalUI is a folder served at /ui/; "" = none.
	ExternalUI string
	// AllowOrigins are the cross-origin origins allowed besides loopback
	// ones when there is no secret.
	AllowOrigins []string
	// Spec is the spec in force: the outbounds' types, the groups' check
	// URLs, the inbounds' ports (SetSpec replaces it after a reload).
	Spec *spec.Spec
	// Reload, when set, applies a configuration as SIGHUP does: from path,
	// from payload, or (both empty) the file the process runs. A refusal
	// leaves the running configuration serving and is its error.
	Reload func(path string, payload []byte) error
	// Restart, when set, begins a restart of the process (POST /restart):
	// it returns at once, nil once the restart is under way, and the
	// process then stops as on SIGTERM (Close among it, which lets the
	// answer go out first) and executes its binary again. Without it
	// POST /restart is 501.
	Restart func() error
	// Logs, when set, is the hub of the process's log records: /logs
	// streams them.
	Logs *LogHub
	// Version is what /version reports.
	Version string
	// LogLevel, when set, is the process's log level: PATCH /configs
	// changes it. Without it a new level is only stored and reported.
	LogLevel *slog.LevelVar
	// Metrics, when set, serves GET /metrics (the Prometheus exposition,
	// behind the secret); without it there is no such endpoint.
	Metrics http.Handler
	// Downloads, when set, are the url providers' and rule sets'
	// downloads: /providers shows their state and PUT downloads now.
	Downloads Downloads
	// Reapply, when set, applies the running configuration again, reading
	// its provider and rule-set files anew (PUT of a file provider).
	Reapply func() error
	Logger  *slog.Logger
}

// Server is the API's HTTP server. Its goroutines (the server's and
// every stream's) end by Close.
type Server struct {
	b    Backend
	opts Options
	log  *slog.Logger
	spec atomic.Pointer[spec.Spec]
	// logLevel is the level /configs reports, in Clash's words.
	logLevel atomic.Pointer[string]

	ctx    context.Context // cancelled by Close: ends every stream
	cancel context.CancelFunc

	mu      sync.Mutex // guards srv, ln, closed
	srv     *http.Server
	ln      net.Listener
	closed  bool
	wg      sync.WaitGroup // the serve loop and every WebSocket stream
	handler http.Handler
}

// New returns a server over b; Start listens.
func New(b Backend, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Spec == nil {
		opts.Spec = &spec.Spec{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{b: b, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel}
	s.spec.Store(opts.Spec)
	lvl := clashLevel(opts.Spec.Log.Level)
	s.logLevel.Store(&lvl)
	s.handler = s.routes()
	return s
}

// SetSpec replaces the spec the API describes (after a reload applied).
func (s *Server) SetSpec(sp *spec.Spec) {
	if sp != nil {
		s.spec.Store(sp)
	}
}

// Handler is the API's handler, for tests that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on listen (host:port) and serves until Close.
func (s *Server) Start(listen string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.srv != nil {
		return net.ErrClosed
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api server stopped", "error", err)
		}
	}()
	s.log.Info("api listening", "address", ln.Addr().String())
	return nil
}

// Addr is the address Start bound, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops serving, ends every stream and waits for the server's
// goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	s.cancel()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err = srv.Shutdown(ctx); err != nil {
			err = srv.Close()
		}
		cancel()
	}
	s.wg.Wait()
	return err
}
