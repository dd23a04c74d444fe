package main

import (
	"io"
	"log/slog"

	"switchyard/spec"
)

// levelTrace is below debug: slog has no trace level of its own.
const levelTrace = slog.LevelDebug - 4

func newLogger(l spec.Log, w io.Writer) *slog.Logger {
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
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
