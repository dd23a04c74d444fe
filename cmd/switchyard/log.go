package main

import (
	"io"
	"log/slog"

	"switchyard/spec"
)

// levelTrace is below debug: slog has no trace level of its own.
const levelTrace = slog.LevelDebug - 4

func newLogger(l spec.Log, w io.Writer) *slog.Logger {
	log, _ := newLeveledLogger(l, w)
	return log
}

// newLeveledLogger is newLogger with its level, which may be changed while
// the process runs (the API's PATCH /configs).
func newLeveledLogger(l spec.Log, w io.Writer) (*slog.Logger, *slog.LevelVar) {
	var level slog.Level
	switch l.Level {
	case "trace":
		level = levelTrace
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	lv := new(slog.LevelVar)
	lv.Set(level)
	opts := &slog.HandlerOptions{Level: lv}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), lv
	}
	return slog.New(slog.NewTextHandler(w, opts)), lv
}
