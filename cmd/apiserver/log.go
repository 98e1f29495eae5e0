package main

import (
	"log/slog"

	"github.com/go-logr/logr"
)

// toLogr adapts slog for controller-runtime's own logs, so both share one JSON stream.
func toLogr(l *slog.Logger) logr.Logger { return logr.FromSlogHandler(l.Handler()) }
