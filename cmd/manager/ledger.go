package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// serveLedger serves the ledger to the REST apiserver replicas on every manager replica: the
// elected one answers, the others say not_ready (and the replicas retry). With secure, a caller
// must be authenticated by the kube-apiserver and allowed the non-resource URL /ledger/v1/*
// (config/rbac/ledger_client_role.yaml), as kubebuilder's metrics endpoint does (ledgerAuth).
func serveLedger(mgr ctrl.Manager, l *ledger.Ledger, addr string, secure bool) error {
	handler := ledger.Handler(l)
	if secure {
		hc, err := rest.HTTPClientFor(mgr.GetConfig())
		if err != nil {
			return err
		}
		auth, err := ledgerAuth(mgr.GetConfig(), hc, quietWhenCallerGaveUp(mgr.GetLogger().WithName("ledger-auth")))
		if err != nil {
			return err
		}
		handler = auth(handler)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		// net/http's own errors in the manager's log format, not the standard log package's.
		ErrorLog: slog.NewLogLogger(logr.ToSlogHandler(mgr.GetLogger().WithName("ledger-server")), slog.LevelWarn)}
	return mgr.Add(leaderless(func(ctx context.Context) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}))
}

// quietWhenCallerGaveUp logs the filter's "Authentication failed" for context.Canceled at V(1),
// without a stack trace: the caller (a REST apiserver replica past its deadline for a hung
// manager) hung up before the TokenReview came back, which says nothing about its credentials.
func quietWhenCallerGaveUp(log logr.Logger) logr.Logger {
	return logr.New(callerGaveUpSink{log.GetSink()})
}

type callerGaveUpSink struct{ logr.LogSink }

func (s callerGaveUpSink) Error(err error, msg string, keysAndValues ...any) {
	if !errors.Is(err, context.Canceled) {
		s.LogSink.Error(err, msg, keysAndValues...)
		return
	}
	if s.LogSink.Enabled(1) {
		s.LogSink.Info(1, "a ledger caller gave up before it was answered", append(keysAndValues, "during", msg, "error", err.Error())...)
	}
}

func (s callerGaveUpSink) WithValues(keysAndValues ...any) logr.LogSink {
	return callerGaveUpSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s callerGaveUpSink) WithName(name string) logr.LogSink {
	return callerGaveUpSink{s.LogSink.WithName(name)}
}

// leaderless is a runnable that runs on every replica, elected or not.
type leaderless func(context.Context) error

func (f leaderless) Start(ctx context.Context) error { return f(ctx) }
func (f leaderless) NeedLeaderElection() bool        { return false }

// publishLedger has the elected manager point the ledger's Service at its own pod ($POD_IP).
func publishLedger(mgr ctrl.Manager, namespace, service, addr string) error {
	podIP := os.Getenv("POD_IP")
	if podIP == "" {
		return errors.New("--ledger-service needs POD_IP (the downward API's status.podIP)")
	}
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--ledger-bind-address %q: %w", addr, err)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return fmt.Errorf("--ledger-bind-address %q: %w", addr, err)
	}
	return mgr.Add(&ledger.Endpoint{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: namespace, Service: service,
		PodIP: podIP, Port: int32(port), Recheck: ledgerEndpointRecheck})
}

// ledgerEndpointRecheck is how often the elected manager reads the ledger's EndpointSlice to
// point it back at itself if anything else wrote it: one Get, no write while it points here.
const ledgerEndpointRecheck = 10 * time.Second
