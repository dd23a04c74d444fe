package transport

import (
	"net"
	"sync"
	"time"
)

// earlyWait is how long an early-data WebSocket waits for its first Write
// before it upgrades without data.
const earlyWait = 200 * time.Millisecond

// The upgrade states of an earlyConn.
const (
	earlyIdle    = iota // no upgrade yet
	earlyRunning        // one caller is upgrading; the others wait on done
	earlyDone           // ws or err is set
	earlyClosed         // closed before any upgrade
)

// earlyConn is a WebSocket whose upgrade is deferred: the first Write sends
// the upgrade request with up to maxEarly of its bytes in the early data
// header, and the rest as frames. A Read, or earlyWait without a Write,
// upgrades without data. The connection under it is already up, so
// deadlines and addresses are its own from the start.
type earlyConn struct {
	net.Conn
	cfg *wsConfig

	mu    sync.Mutex // guards state, ws, err
	state int
	ws    *wsConn
	err   error
	done  chan struct{} // closed when the upgrade ended either way
	timer *time.Timer
}

func newEarlyConn(c net.Conn, cfg *wsConfig) *earlyConn {
	e := &earlyConn{Conn: c, cfg: cfg, done: make(chan struct{})}
	e.timer = time.AfterFunc(earlyWait, func() {
		if e.claim() {
			e.upgrade(nil)
		}
	})
	return e
}

// claim makes the caller the one that upgrades, if nobody has.
func (e *earlyConn) claim() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != earlyIdle {
		return false
	}
	e.state = earlyRunning
	return true
}

// upgrade runs the handshake with early and publishes the result.
func (e *earlyConn) upgrade(early []byte) {
	ws, err := e.cfg.handshake(e.Conn, early)
	e.mu.Lock()
	e.ws, e.err, e.state = ws, err, earlyDone
	e.mu.Unlock()
	close(e.done)
}

// upgraded waits for the upgrade somebody else runs, or runs it without
// early data.
func (e *earlyConn) upgraded() (*wsConn, error) {
	if e.claim() {
		e.timer.Stop()
		e.upgrade(nil)
	}
	e.mu.Lock()
	closed := e.state == earlyClosed
	e.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	<-e.done
	return e.ws, e.err
}

// Write upgrades with the first bytes of p on the first call.
func (e *earlyConn) Write(p []byte) (int, error) {
	if e.claim() {
		e.timer.Stop()
		early := p[:min(len(p), e.cfg.maxEarly)]
		e.upgrade(early)
		if e.err != nil {
			return 0, e.err
		}
		if len(early) == len(p) {
			return len(p), nil
		}
		n, err := e.ws.Write(p[len(early):])
		return len(early) + n, err
	}
	ws, err := e.upgraded()
	if err != nil {
		return 0, err
	}
	return ws.Write(p)
}

// Read upgrades without data if no Write did yet.
func (e *earlyConn) Read(p []byte) (int, error) {
	ws, err := e.upgraded()
	if err != nil {
		return 0, err
	}
	return ws.Read(p)
}

// Close closes the WebSocket (with its close frame) once upgraded, else the
// connection; an upgrade in flight fails and is waited for.
func (e *earlyConn) Close() error {
	e.timer.Stop()
	e.mu.Lock()
	state := e.state
	if state == earlyIdle {
		e.state = earlyClosed
	}
	e.mu.Unlock()
	switch state {
	case earlyIdle, earlyClosed:
		return e.Conn.Close()
	case earlyRunning:
		err := e.Conn.Close()
		<-e.done
		return err
	}
	if e.ws != nil {
		return e.ws.Close()
	}
	return e.Conn.Close()
}
