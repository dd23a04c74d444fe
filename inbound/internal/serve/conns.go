// Package serve holds what the stream inbounds share: the set of listeners
// and live connections a server closes and waits for, the reading and
// sniffing of a client's first bytes, and credential checks.
package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"

	"switchyard/netx"
)

// Conns is a server's listeners, live connections and the handlers serving
// them. Stop closes them all; Wait waits for the handlers. A handler owns
// every goroutine it starts and joins them before it returns, so once Wait
// returns nothing the server started is running.
type Conns struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // one count per live connection
	log    *slog.Logger

	mu     sync.Mutex // guards closed, lns and live
	closed bool
	lns    map[net.Listener]struct{}
	live   map[net.Conn]struct{}
}

// NewConns returns an empty set; Serve logs its listeners' trouble to log.
func NewConns(log *slog.Logger) *Conns {
	ctx, cancel := context.WithCancel(context.Background())
	return &Conns{
		ctx:    ctx,
		cancel: cancel,
		log:    log,
		lns:    make(map[net.Listener]struct{}),
		live:   make(map[net.Conn]struct{}),
	}
}

// Context is cancelled by Stop: dials made for a connection use it.
func (s *Conns) Context() context.Context { return s.ctx }

// Serve accepts connections on ln and runs handle for each on a goroutine
// of its own, tracked as by Add; the connection is closed when handle
// returns. It returns nil once Stop has been called (at once if it already
// was), or the listener's error. Accept errors that pass with time are
// ridden out as netx.Acceptor does: at the descriptor limit, waiting clients
// are closed at once rather than left hanging.
func (s *Conns) Serve(ln net.Listener, handle func(net.Conn)) error {
	if !s.addListener(ln) {
		ln.Close()
		return nil
	}
	defer s.removeListener(ln)
	a := netx.NewAcceptor(ln, s.log, nil, s.ctx.Done())
	for {
		c, err := a.Accept()
		if err != nil {
			if s.stopped() {
				return nil
			}
			return err
		}
		if !s.Add(c) {
			continue
		}
		go func() {
			defer s.Done(c)
			handle(c)
		}()
	}
}

// Add registers c as live, to be closed by Stop and counted by Wait until
// Done(c). Once Stop has been called it closes c and returns false.
func (s *Conns) Add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.live[c] = struct{}{}
	s.wg.Add(1)
	return true
}

// Done closes c and ends its registration.
func (s *Conns) Done(c net.Conn) {
	s.mu.Lock()
	delete(s.live, c)
	s.mu.Unlock()
	c.Close()
	s.wg.Done()
}

// Stop stops accepting and closes every listener and live connection;
// it does not wait. Later calls do nothing.
func (s *Conns) Stop() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	lns := make([]net.Listener, 0, len(s.lns))
	for ln := range s.lns {
		lns = append(lns, ln)
	}
	conns := make([]net.Conn, 0, len(s.live))
	for c := range s.live {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var errs []error
	for _, ln := range lns {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return errors.Join(errs...)
}

// Wait waits for every handler registered by Add to call Done.
func (s *Conns) Wait() { s.wg.Wait() }

// Close is Stop, then Wait.
func (s *Conns) Close() error {
	err := s.Stop()
	s.Wait()
	return err
}

func (s *Conns) addListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.lns[ln] = struct{}{}
	return true
}

func (s *Conns) removeListener(ln net.Listener) {
	s.mu.Lock()
	delete(s.lns, ln)
	s.mu.Unlock()
}

func (s *Conns) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
