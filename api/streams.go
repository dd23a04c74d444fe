package api

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

func isUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// upgrader checks no origin itself: guardOrigin has.
var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 4096,
	CheckOrigin:     func(*http.Request) bool { return true },
}

// hold counts one more goroutine of the server's, unless it is closed.
func (s *Server) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// serveWS upgrades r and sends next() at once and then every period, until
// the peer goes, a write fails or the server closes.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, period time.Duration, next func() any) {
	s.serveWSWith(w, r, period, encodeJSON(next))
}

// encodeJSON writes next() as one line of JSON.
func encodeJSON(next func() any) func(io.Writer) error {
	return func(w io.Writer) error { return json.NewEncoder(w).Encode(next()) }
}

// wsWriteTimeout bounds each message's write: a peer that reads slower is
// dropped, so that what it has not read is never held for it.
const wsWriteTimeout = 5 * time.Second

// serveWSWith upgrades r and has write write one text message at once and
// then one every period (a tick missed while a write runs is skipped),
// until the peer goes, a write fails or the server closes.
func (s *Server) serveWSWith(w http.ResponseWriter, r *http.Request, period time.Duration, write func(io.Writer) error) {
	if !s.hold() {
		writeError(w, http.StatusServiceUnavailable, "Server closing")
		return
	}
	defer s.wg.Done()
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer c.Close()
	// The reader sees the peer's close (and answers pings); it ends when
	// the conn is closed.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}()
	defer func() { c.Close(); <-gone }()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		c.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		mw, err := c.NextWriter(websocket.TextMessage)
		if err != nil {
			return
		}
		if err := write(mw); err != nil {
			return
		}
		if err := mw.Close(); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-gone:
			return
		case <-r.Context().Done():
			c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second))
			return
		}
	}
}

// serveChunked sends next() as one JSON line at once and then every
// period, flushed, until the client goes or the server closes.
func (s *Server) serveChunked(w http.ResponseWriter, r *http.Request, period time.Duration, next func() any) {
	s.serveChunkedWith(w, r, period, encodeJSON(next))
}

// serveChunkedWith has write write one line at once and then one every
// period, each flushed, until the client goes, a write fails or the
// server closes.
func (s *Server) serveChunkedWith(w http.ResponseWriter, r *http.Request, period time.Duration, write func(io.Writer) error) {
	w.Header().Set("Content-Type", "application/json")
	rc := http.NewResponseController(w)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		rc.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		if err := write(w); err != nil || rc.Flush() != nil {
			return
		}
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
}

// stream serves r as a WebSocket or as chunked HTTP.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, period time.Duration, next func() any) {
	if isUpgrade(r) {
		s.serveWS(w, r, period, next)
		return
	}
	s.serveChunked(w, r, period, next)
}

// traffic is GET /traffic: {"up","down"} in bytes per second over the last
// second, every second.
func (s *Server) traffic(w http.ResponseWriter, r *http.Request) {
	up, down := s.byteTotals()
	at := time.Now()
	first := true
	s.stream(w, r, time.Second, func() any {
		if first {
			first = false
			return map[string]int64{"up": 0, "down": 0}
		}
		u, d := s.byteTotals()
		now := time.Now()
		secs := now.Sub(at).Seconds()
		out := map[string]int64{"up": int64(float64(u-up) / secs), "down": int64(float64(d-down) / secs)}
		up, down, at = u, d, now
		return out
	})
}

// memory is GET /memory: the heap and stacks in use, every second.
func (s *Server) memory(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, time.Second, func() any {
		return map[string]uint64{"inuse": memInUse(), "oslimit": 0}
	})
}
