package netx

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"switchyard/internal/ratelog"
)

// TransientAccept reports whether an Accept error passes with time (a
// timeout, a full file table, a client's early reset), so that a listener
// should pause and accept again rather than stop.
func TransientAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// outOfFiles reports whether an Accept error is the descriptor limit, the
// process's or the system's.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// drainWait bounds the accept made with the spare descriptor's room: long
// enough to take a client already in the listen queue, short enough that a
// queue with none keeps no other goroutine from the descriptor for long.
const drainWait = 20 * time.Millisecond

// Acceptor accepts connections and rides out the errors that pass with time,
// pausing between retries. At the descriptor limit the kernel still
// completes clients' connects into the listen queue, where they would wait
// for an answer that never comes: the acceptor then frees the spare
// descriptor the process keeps, accepts one waiting client and closes it at
// once (serving it instead when descriptors have freed up meanwhile), and
// takes the spare again. It logs the limit at warn, at most every 10 s.
type Acceptor struct {
	ln   net.Listener
	log  *slog.Logger
	open func() int      // flows open now, for the log; nil: not known
	done <-chan struct{} // ends a pause early; nil: never

	full   ratelog.Limiter // the times the limit was met, for the log's rate
	closed atomic.Int64    // clients closed at the limit
}

// NewAcceptor returns an acceptor of ln. open, when not nil, counts the open
// flows the log line names; done ends a pause between retries early.
func NewAcceptor(ln net.Listener, log *slog.Logger, open func() int, done <-chan struct{}) *Acceptor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	spare.reserve()
	return &Acceptor{ln: ln, log: log, open: open, done: done}
}

// Accept returns the next connection, or the first error that does not
// pass with time (net.ErrClosed once the listener is closed).
func (a *Acceptor) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := a.ln.Accept()
		if err == nil {
			return c, nil
		}
		if !TransientAccept(err) {
			return nil, err
		}
		if outOfFiles(err) {
			c, drained := a.atLimit(err)
			if c != nil {
				return c, nil
			}
			if drained {
				pause = 0
				continue // more clients may be queued: answer them too
			}
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		if !a.sleep(pause) {
			return nil, net.ErrClosed
		}
	}
}

// atLimit answers a client waiting in the listen queue while the process
// has no descriptor for it. It returns the client when descriptors have
// freed up since, or reports whether one was closed.
func (a *Acceptor) atLimit(cause error) (net.Conn, bool) {
	dl, ok := a.ln.(interface{ SetDeadline(time.Time) error })
	if !ok || !spare.release() {
		a.logLimit(cause)
		return nil, false
	}
	dl.SetDeadline(time.Now().Add(drainWait))
	c, err := a.ln.Accept()
	dl.SetDeadline(time.Time{})
	if err != nil {
		spare.reserve()
		a.logLimit(cause)
		return nil, false
	}
	if spare.reserve() {
		return c, false // room again: serve it
	}
	c.Close()
	a.closed.Add(1)
	spare.reserve()
	a.logLimit(cause)
	return nil, true
}

// logLimit logs that the process is at its descriptor limit, at most once
// per interval, with the clients closed for it so far.
func (a *Acceptor) logLimit(cause error) {
	if _, _, due := a.full.Note(); !due {
		return
	}
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	attrs := []any{"error", cause, "descriptor_limit", lim.Cur, "closed_total", a.closed.Load(), "listen", a.ln.Addr().String()}
	if a.open != nil {
		attrs = append(attrs, "open_flows", a.open())
	}
	a.log.Warn("out of file descriptors: new connections are closed at once", attrs...)
}

func (a *Acceptor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.done:
		return false
	}
}

// spare is the descriptor the process keeps in reserve so that, at the
// limit, it can still accept a client only to close it. One for the
// process: the limit is the process's.
var spare spareFD

type spareFD struct {
	mu sync.Mutex // guards fd and ok
	fd int
	ok bool // fd is held
}

// reserve opens the spare when it is not held, and reports whether it is.
func (s *spareFD) reserve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ok {
		return true
	}
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	s.fd, s.ok = fd, true
	return true
}

// release closes the spare, and reports whether it was held.
func (s *spareFD) release() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ok {
		return false
	}
	syscall.Close(s.fd)
	s.ok = false
	return true
}
