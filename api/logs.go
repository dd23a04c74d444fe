package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// LogHub hands the process's log records to the API's /logs subscribers:
// Handler wraps the process's slog handler, and every record it handles is
// also offered to each subscriber whose level it reaches. A subscriber that
// does not keep up loses records (its queue holds logQueue), never slows
// the logging goroutine.
type LogHub struct {
	mu   sync.Mutex
	subs map[*logSub]struct{}
}

// logQueue bounds the records waiting for one subscriber.
const logQueue = 256

type logSub struct {
	level slog.Level
	ch    chan logLine
}

// logLine is one record as /logs sends it.
type logLine struct {
	Time    time.Time
	Level   slog.Level
	Message string
	Fields  []logField
}

type logField struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// NewLogHub returns a hub with no subscriber.
func NewLogHub() *LogHub { return &LogHub{subs: map[*logSub]struct{}{}} }

// Handler wraps h so that its records also reach the hub.
func (hb *LogHub) Handler(h slog.Handler) slog.Handler { return &hubHandler{inner: h, hub: hb} }

func (hb *LogHub) subscribe(level slog.Level) *logSub {
	s := &logSub{level: level, ch: make(chan logLine, logQueue)}
	hb.mu.Lock()
	hb.subs[s] = struct{}{}
	hb.mu.Unlock()
	return s
}

func (hb *LogHub) unsubscribe(s *logSub) {
	hb.mu.Lock()
	delete(hb.subs, s)
	hb.mu.Unlock()
}

func (hb *LogHub) publish(l logLine) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	for s := range hb.subs {
		if l.Level < s.level {
			continue
		}
		select {
		case s.ch <- l:
		default:
		}
	}
}

func (hb *LogHub) listening() bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return len(hb.subs) > 0
}

// hubHandler is a slog.Handler that also publishes to a hub, with the
// attributes and groups given to it along the way.
type hubHandler struct {
	inner  slog.Handler
	hub    *LogHub
	attrs  []logField
	prefix string // the open groups, "a.b."
}

func (h *hubHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *hubHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.inner.Handle(ctx, r)
	if h.hub.listening() {
		l := logLine{Time: r.Time, Level: r.Level, Message: r.Message, Fields: append([]logField(nil), h.attrs...)}
		r.Attrs(func(a slog.Attr) bool {
			l.Fields = appendAttr(l.Fields, h.prefix, a)
			return true
		})
		h.hub.publish(l)
	}
	return err
}

func (h *hubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.inner = h.inner.WithAttrs(as)
	n.attrs = append([]logField(nil), h.attrs...)
	for _, a := range as {
		n.attrs = appendAttr(n.attrs, h.prefix, a)
	}
	return &n
}

func (h *hubHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.inner = h.inner.WithGroup(name)
	n.prefix = h.prefix + name + "."
	return &n
}

func appendAttr(fs []logField, prefix string, a slog.Attr) []logField {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			fs = appendAttr(fs, p, g)
		}
		return fs
	}
	if a.Key == "" {
		return fs
	}
	return append(fs, logField{Key: prefix + a.Key, Value: a.Value.String()})
}

// recordLevel is a record's level in Clash's words.
func recordLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warning"
	}
	return "error"
}

// parseClashLevel reads ?level= (default info), in Clash's words or the
// spec's.
func parseClashLevel(s string) (slog.Level, bool) {
	if s == "" {
		return slog.LevelInfo, true
	}
	l, ok := slogLevels[strings.ToLower(s)]
	return l, ok
}

// logs is GET /logs?level=&format=: every log record at or above level as
// it happens, {"type","payload"} as Clash sends them, or with
// format=structured {"time","level","message","fields":[{key,value}]}; a
// WebSocket or chunked HTTP.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	if s.opts.Logs == nil {
		writeError(w, http.StatusNotFound, "logs are not available")
		return
	}
	level, ok := parseClashLevel(r.URL.Query().Get("level"))
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid level")
		return
	}
	structured := r.URL.Query().Get("format") == "structured"
	encode := func(l logLine) any {
		if structured {
			return map[string]any{"time": l.Time.Format(time.RFC3339Nano), "level": recordLevel(l.Level), "message": l.Message, "fields": l.Fields}
		}
		p := l.Message
		for _, f := range l.Fields {
			p += " " + f.Key + "=" + f.Value
		}
		return map[string]string{"type": recordLevel(l.Level), "payload": p}
	}
	if !s.hold() {
		writeError(w, http.StatusServiceUnavailable, "Server closing")
		return
	}
	defer s.wg.Done()
	sub := s.opts.Logs.subscribe(level)
	defer s.opts.Logs.unsubscribe(sub)
	if !isUpgrade(r) {
		w.Header().Set("Content-Type", "application/json")
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w)
		if rc.Flush() != nil {
			return
		}
		for {
			select {
			case l := <-sub.ch:
				if enc.Encode(encode(l)) != nil || rc.Flush() != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
		}
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
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
	for {
		select {
		case l := <-sub.ch:
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if c.WriteJSON(encode(l)) != nil {
				return
			}
		case <-gone:
			return
		case <-r.Context().Done():
			c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second))
			return
		}
	}
}
