package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"switchyard/inbound"
	httpin "switchyard/inbound/http"
	"switchyard/inbound/mixed"
	"switchyard/inbound/socks"
	"switchyard/netx"
	"switchyard/spec"
)

// server is what every inbound is: it serves connections the supervisor
// accepts, and Close ends them all.
type server interface {
	ServeConn(c net.Conn, first []byte)
	Close() error
}

func newServer(in spec.Inbound, c inbound.Connector, log *slog.Logger) (server, error) {
	cfg := socks.Config{Tag: in.Tag, Listen: in.Listen, UDP: in.UDP, Users: in.Users, Sniff: in.Sniff, SOCKS4: in.SOCKS4,
		HandshakeTimeout: in.HandshakeTimeout, MaxHandshakes: in.MaxHandshakes, MaxUDPAssociations: in.MaxUDPAssociations}
	switch in.Type {
	case "socks":
		return socks.New(cfg, c, log), nil
	case "http":
		return httpin.New(httpin.Config(cfg), c, log), nil
	case "mixed":
		return mixed.New(cfg, c, log), nil
	}
	return nil, fmt.Errorf("inbound %s: unknown inbound type %q", in.Tag, in.Type)
}

// listener is one bound inbound address. The supervisor owns its accept
// loop, so an apply that changes the inbound's settings but not its address
// swaps the server new connections go to without closing the socket.
type listener struct {
	spec spec.Inbound
	ln   net.Listener
	srv  atomic.Pointer[serverBox]
	log  *slog.Logger
	open func() int // the flows open and being dialed, for the log at the descriptor limit

	wg     sync.WaitGroup // the accept loop and every connection it hands off
	closed atomic.Bool
}

type serverBox struct{ s server }

func (l *listener) addr() net.Addr { return l.ln.Addr() }

func (l *listener) current() server { return l.srv.Load().s }

// swap makes new connections go to s and returns the server they went to.
func (l *listener) swap(in spec.Inbound, s server) server {
	l.spec = in
	return l.srv.Swap(&serverBox{s}).s
}

func (l *listener) run() {
	l.wg.Add(1)
	go l.accept()
}

func (l *listener) accept() {
	defer l.wg.Done()
	a := netx.NewAcceptor(l.ln, l.log, l.open, nil)
	for {
		c, err := a.Accept()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			l.log.Error("inbound stopped accepting", "error", err)
			return
		}
		s := l.current()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			s.ServeConn(c, nil)
		}()
	}
}

// stop closes the socket and waits for the accept loop, leaving the
// server's connections to whoever owns the server now.
func (l *listener) stop() {
	l.closed.Store(true)
	l.ln.Close()
}

// close stops accepting and closes the server with its connections.
func (l *listener) close() error {
	l.stop()
	err := l.current().Close()
	l.wg.Wait()
	return err
}

// bindAll binds every inbound of ins; on any failure it closes what it bound
// and returns the error.
func (sv *Supervisor) bindAll(ins []spec.Inbound) (map[string]*listener, error) {
	bound := make(map[string]*listener, len(ins))
	for _, in := range ins {
		l, err := sv.bind(in)
		if err != nil {
			for _, b := range bound {
				b.close()
			}
			return nil, err
		}
		bound[in.Tag] = l
	}
	return bound, nil
}

func (sv *Supervisor) bind(in spec.Inbound) (*listener, error) {
	s, err := newServer(in, sv.conn, sv.log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", in.Listen.String())
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("inbound %s: %w", in.Tag, err)
	}
	l := &listener{spec: in, ln: ln, log: sv.log.With("inbound", in.Tag), open: sv.tracker.Open}
	l.srv.Store(&serverBox{s})
	return l, nil
}
