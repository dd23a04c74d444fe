package api

import (
	"encoding/json"
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
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := c.WriteJSON(next()); err != nil {
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
	w.Header().Set("Content-Type", "application/json")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := enc.Encode(next()); err != nil || rc.Flush() != nil {
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
	_, up, down := s.account()
	at := time.Now()
	first := true
	s.stream(w, r, time.Second, func() any {
		if first {
			first = false
			return map[string]int64{"up": 0, "down": 0}
		}
		_, u, d := s.account()
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
