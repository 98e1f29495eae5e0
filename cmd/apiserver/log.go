package main

import (
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// toLogr adapts slog for controller-runtime's own logs, so both share one JSON stream.
func toLogr(l *slog.Logger) logr.Logger { return logr.FromSlogHandler(l.Handler()) }

// useLogger makes l the logger of everything in the process that does not take one: the
// packages passed none, which log to slog.Default() (and net/http and the standard log
// package through it), controller-runtime, and client-go, which logs through klog. The
// process's own code passes l explicitly; this only keeps a line that was missed out of the
// plain-text format in an otherwise JSON stream.
func useLogger(l *slog.Logger) {
	slog.SetDefault(l)
	ctrl.SetLogger(toLogr(l))
	klog.SetSlogLogger(l)
}
