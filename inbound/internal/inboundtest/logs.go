package inboundtest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// Line is one record a Logs kept: its level, message and attributes (those
// of the logger's With included), each as text.
type Line struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Logs keeps every record of the loggers made from it, and writes them to
// the test's output too.
type Logs struct {
	out slog.Handler

	mu    sync.Mutex // guards lines
	lines []Line
}

// CaptureLogs returns a logger at debug level whose records l keeps.
func CaptureLogs(t testing.TB) (*slog.Logger, *Logs) {
	l := &Logs{out: slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})}
	return slog.New(&keeper{l: l, out: l.out}), l
}

// Lines returns the records of level with message msg.
func (l *Logs) Lines(level slog.Level, msg string) []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Line
	for _, line := range l.lines {
		if line.Level == level && line.Msg == msg {
			out = append(out, line)
		}
	}
	return out
}

type keeper struct {
	l     *Logs
	out   slog.Handler
	attrs []slog.Attr
}

func (k *keeper) Enabled(context.Context, slog.Level) bool { return true }

func (k *keeper) Handle(ctx context.Context, r slog.Record) error {
	line := Line{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range k.attrs {
		line.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { line.Attrs[a.Key] = a.Value.String(); return true })
	k.l.mu.Lock()
	k.l.lines = append(k.l.lines, line)
	k.l.mu.Unlock()
	return k.out.Handle(ctx, r)
}

func (k *keeper) WithAttrs(as []slog.Attr) slog.Handler {
	return &keeper{l: k.l, out: k.out.WithAttrs(as), attrs: append(append([]slog.Attr(nil), k.attrs...), as...)}
}

func (k *keeper) WithGroup(string) slog.Handler { return k }
