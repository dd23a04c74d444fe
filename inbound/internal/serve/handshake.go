package serve

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"switchyard/internal/ratelog"
)

// DefaultHandshakeTimeout bounds a connection's whole handshake, from its
// accept until it is authenticated and its request read: the mixed port's
// first byte, the SOCKS5 greeting, authentication and request, or the HTTP
// request head. A client on loopback or a LAN needs milliseconds; 10 s
// leaves room for a slow link while keeping a connection that sends a few
// bytes and then nothing from holding its descriptor and buffers longer.
const DefaultHandshakeTimeout = 10 * time.Second

// DefaultMaxHandshakes bounds an inbound's connections that are in their
// handshake at once. A handshake takes a round trip, so even a browser
// opening dozens of connections has few in it at any moment; 256 of them
// hold at most 256 × (a 64 KiB HTTP head and its buffers), about 40 MiB,
// however many more connections an attacker opens.
const DefaultMaxHandshakes = 256

// Handshakes bounds an inbound's connections in their handshake and gives
// each its deadline. A connection past the bound is closed at once; the
// refusals are counted and logged at most once per interval.
type Handshakes struct {
	timeout time.Duration
	limit   int
	log     *slog.Logger
	refused ratelog.Limiter

	mu      sync.Mutex // guards n, peak and release
	n       int
	peak    int         // the most in handshake since the last release
	release *time.Timer // pending release of a burst's memory
}

// After a burst of at least releaseBurst handshakes at once, once none is
// left, the memory they held goes back to the operating system
// releaseDelay later: the runtime would otherwise keep it until its next
// collection cycle, which an idle process may not run for minutes.
const (
	releaseBurst = 64
	releaseDelay = time.Second
)

// NewHandshakes returns the bound of one inbound: limit handshakes at once,
// each given timeout from its start (the defaults for values not above
// zero).
func NewHandshakes(timeout time.Duration, limit int, log *slog.Logger) *Handshakes {
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	if limit <= 0 {
		limit = DefaultMaxHandshakes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handshakes{timeout: timeout, limit: limit, log: log}
}

// Handshake is one connection's handshake: it holds a slot of its inbound's
// bound until Done.
type Handshake struct {
	// Deadline ends the handshake: every read and write of it is made
	// under it.
	Deadline time.Time

	h    *Handshakes
	once sync.Once
}

// Begin starts the handshake of a connection just accepted from src. When
// the inbound is at its bound it returns nil: the caller closes the
// connection at once.
func (h *Handshakes) Begin(src any) *Handshake {
	h.mu.Lock()
	if h.n >= h.limit {
		h.mu.Unlock()
		if n, total, due := h.refused.Note(); due {
			h.log.Warn("too many connections in their handshake; closing new ones at once",
				"limit", h.limit, "closed", n, "closed_total", total, "source", src)
		}
		return nil
	}
	h.n++
	h.peak = max(h.peak, h.n)
	h.mu.Unlock()
	return &Handshake{Deadline: time.Now().Add(h.timeout), h: h}
}

// InHandshake is the number of connections in their handshake now.
func (h *Handshakes) InHandshake() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Refused is the number of connections closed at the bound so far.
func (h *Handshakes) Refused() int64 { return h.refused.Total() }

// Done ends the handshake and frees its slot; later calls do nothing. A nil
// Handshake does nothing.
func (hs *Handshake) Done() {
	if hs == nil {
		return
	}
	hs.once.Do(func() {
		h := hs.h
		h.mu.Lock()
		defer h.mu.Unlock()
		h.n--
		if h.n == 0 && h.peak >= releaseBurst {
			h.peak = 0
			if h.release == nil {
				h.release = time.AfterFunc(releaseDelay, debug.FreeOSMemory)
			} else {
				h.release.Reset(releaseDelay)
			}
		}
	})
}
