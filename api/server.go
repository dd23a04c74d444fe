// Package api is the Clash-compatible HTTP controller: the REST and
// WebSocket endpoints dashboards read (proxies, groups, delay tests,
// connections, traffic, memory, configs), over the running supervisor.
//
// It reads published state only (the group manager's introspection, the
// health engine's states, the tracker's snapshots) and writes through the
// supervisor's own calls (SelectGroup, Tracker.Kill).
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

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
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
	// Logs, when set, is the hub of the process's log records: /logs
	// streams them.
	Logs *LogHub
	// Version is what /version reports.
	Version string
	// LogLevel, when set, is the process's log level: PATCH /configs
	// changes it. Without it a new level is only stored and reported.
	LogLevel *slog.LevelVar
	Logger   *slog.Logger
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
