// Command manager runs the videogen-operator controllers.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"os"
	"time"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation/backends"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/watchlag"
)

func main() {
	preferPagedLists()
	opts := controllers.DefaultOptions()
	var (
		metricsAddr, probeAddr string
		secureMetrics          bool
		enableLeaderElection   bool
		enableHTTP2            bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (:8443 for HTTPS, :8080 for HTTP, 0 to disable).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health probe endpoint.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false, "Elect a leader so that only one manager reconciles at a time. Without it run one manager: a second one takes the points ledger over and the first exits.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Serve metrics over HTTP/2 (off by default: HTTP/2 rapid reset CVEs).")
	flag.Int64Var(&opts.Task.DefaultPrice, "default-price", opts.Task.DefaultPrice,
		"System default price in points: for templates without a price, and for durations of adjustable templates that have no entry in durationPrices.")
	flag.DurationVar(&opts.Task.DefaultTimeout, "task-timeout", opts.Task.DefaultTimeout,
		"Timeout of a task that sets no spec.timeout; past it the task fails with TimedOut and is refunded.")
	flag.DurationVar(&opts.Task.FinishedTTL, "finished-task-ttl", opts.Task.FinishedTTL,
		"How long finished tasks are kept before they are deleted (0 keeps them forever).")
	flag.DurationVar(&opts.Task.PollInterval, "backend-poll-interval", opts.Task.PollInterval, "How often a running stage is observed at its backend.")
	flag.IntVar(&opts.Task.MaxConcurrentReconciles, "max-concurrent-tasks", opts.Task.MaxConcurrentReconciles, "How many tasks are reconciled in parallel.")
	flag.BoolVar(&opts.Task.TransitionEvents, "task-events", opts.Task.TransitionEvents,
		"Emit a Normal event for each step of a task (points frozen, stage started, succeeded and charged); false keeps only the Warning events of failures, one apiserver write fewer per step on very busy clusters.")
	var (
		ledgerAddr, ledgerKeySecret, ledgerService string
		ledgerSecure                               bool
	)
	flag.StringVar(&ledgerAddr, "ledger-bind-address", ":8084",
		"Address of the ledger's HTTP endpoint, where the REST apiserver replicas admit tasks and read balances (0 to disable).")
	flag.BoolVar(&ledgerSecure, "ledger-secure", true,
		"Admit only callers that the kube-apiserver authenticates (TokenReview) and authorizes for the non-resource URL /ledger/v1/* (SubjectAccessReview).")
	flag.StringVar(&ledgerService, "ledger-service", "",
		"Service (without a selector, in --webhook-secret-namespace) that the elected manager points at itself ($POD_IP), so that every REST apiserver replica reaches the ledger; empty: none (one replica, the apiserver asks the manager beside it).")
	flag.StringVar(&ledgerKeySecret, "ledger-signing-key-secret", "videogen-ledger-signing-key",
		"Secret (in --webhook-secret-namespace) holding the key that signs the admissions of tasks the ledger creates; made if missing.")
	flag.DurationVar(&opts.Ledger.WriteInterval, "ledger-write-interval", opts.Ledger.WriteInterval,
		"Least time between two writes of one PointAccount: charges and top-ups in the meantime share the next write (one carrying the charge of every task the account holds, none of them come since the last write, goes at once).")
	var watchDelay time.Duration
	flag.DurationVar(&watchDelay, "debug-watch-delay", 0,
		"Fault injection for tests only: deliver every watch event to the manager's caches this late (the chaos test's lagging cache).")
	opts.PaymentEvents.BindFlags(flag.CommandLine)
	var backendsConfig string
	flag.StringVar(&backendsConfig, "backends-config", "",
		"YAML file saying which generation backend (HTTP or Kubernetes Jobs) serves which capability; see docs/backend-protocol.md and docs/job-backend.md.")
	var (
		webhookSchedule, allowPrivate string
		webhookTimeout                time.Duration
	)
	flag.StringVar(&webhookSchedule, "webhook-retry-schedule", "5s,5m,30m,2h,5h,10h,10h",
		"Waits before each retry of a failed completion webhook (the first attempt is immediate); jittered by ±10%.")
	flag.DurationVar(&webhookTimeout, "webhook-timeout", 10*time.Second, "Timeout of one completion webhook attempt.")
	flag.IntVar(&opts.Webhooks.Concurrency, "webhook-concurrency", opts.Webhooks.Concurrency,
		"Completion webhooks delivered in parallel (each waits on its receiver, up to --webhook-timeout); one receiver host, or one account, gets a quarter of them at most.")
	flag.StringVar(&allowPrivate, "allow-private-urls", "",
		"Comma-separated CIDRs that completion webhooks may be delivered into (private, loopback and link-local addresses are refused otherwise).")
	flag.StringVar(&opts.Webhooks.SecretNamespace, "webhook-secret-namespace", envOr("POD_NAMESPACE", opts.Webhooks.SecretNamespace),
		"Namespace of the accounts' webhook signing Secrets (shared with the apiserver); $POD_NAMESPACE, the pod's namespace, when set.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	useLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	schedule, err := outbound.ParseSteps(webhookSchedule)
	if err != nil {
		log.Error(err, "bad --webhook-retry-schedule")
		os.Exit(2)
	}
	allow, err := netguard.ParseAllowList(allowPrivate)
	if err != nil {
		log.Error(err, "bad --allow-private-urls")
		os.Exit(2)
	}
	if webhookTimeout <= 0 {
		// No timeout at all: a receiver that never answers would hold a delivery slot for good.
		log.Error(errors.New("must be above 0, got "+webhookTimeout.String()), "bad --webhook-timeout")
		os.Exit(2)
	}
	opts.Webhooks.Schedule = schedule
	opts.Webhooks.Client = outbound.NewGuardedClient(netguard.Policy{Allow: allow}, webhookTimeout)
	if err := pricing.CheckDefault(opts.Task.DefaultPrice); err != nil {
		log.Error(err, "bad --default-price")
		os.Exit(2)
	}
	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = reviewedCallers
	}
	var backendFile backends.File
	if backendsConfig != "" {
		if backendFile, err = backends.Read(backendsConfig); err != nil {
			log.Error(err, "bad --backends-config")
			os.Exit(2)
		}
	}
	cacheOpts := cache.Options{ByObject: controllers.MergeCacheByObject(controllers.CacheByObject(), backendFile.CacheByObject())}
	if watchDelay > 0 {
		log.Info("every watch event reaches the caches late (--debug-watch-delay): for tests only", "delay", watchDelay)
		cacheOpts.NewInformer = watchlag.NewInformer(watchDelay)
	}
	restConfig := ctrl.GetConfigOrDie()
	var lock resourcelock.Interface
	if enableLeaderElection {
		lease, err := leaderLock(restConfig, opts.Webhooks.SecretNamespace)
		if err != nil {
			log.Error(err, "unable to make the leader Lease lock")
			os.Exit(1)
		}
		lock, opts.Ledger.Lease = lease.lock, lease.term
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		// Only open VideoTasks are cached; Job backends watch only the Jobs and Pods they create.
		Cache:                               cacheOpts,
		Scheme:                              scheme.New(),
		Metrics:                             metricsOpts,
		HealthProbeBindAddress:              probeAddr,
		LeaderElection:                      enableLeaderElection,
		LeaderElectionID:                    leaderElectionID,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
	})
	if err != nil {
		log.Error(err, "unable to create manager")
		os.Exit(1)
	}
	// The signing key is read before the caches start, with a direct client.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		log.Error(err, "unable to create a client")
		os.Exit(1)
	}
	keyCtx, cancelKey := context.WithTimeout(context.Background(), time.Minute)
	opts.Ledger.SigningKey, err = ledger.LoadOrCreateKey(keyCtx, direct, opts.Webhooks.SecretNamespace, ledgerKeySecret)
	cancelKey()
	if err != nil {
		log.Error(err, "unable to load the ledger's signing key")
		os.Exit(1)
	}
	if opts.Backends, err = backendFile.Routes(mgr.GetClient()); err != nil {
		log.Error(err, "unable to build the generation backends")
		os.Exit(1)
	}
	pointsLedger, err := controllers.Setup(mgr, opts)
	if err != nil {
		log.Error(err, "unable to set up controllers")
		os.Exit(1)
	}
	if ledgerAddr != "0" {
		if err := serveLedger(mgr, pointsLedger, ledgerAddr, ledgerSecure); err != nil {
			log.Error(err, "unable to serve the ledger")
			os.Exit(1)
		}
	}
	if ledgerService != "" {
		if err := publishLedger(mgr, opts.Webhooks.SecretNamespace, ledgerService, ledgerAddr); err != nil {
			log.Error(err, "unable to point the ledger Service at the elected manager")
			os.Exit(1)
		}
	}
	for _, c := range videogenv1alpha1.Capabilities {
		if name, _, ok := opts.Backends.Route(c); ok {
			log.Info("generation backend", "capability", c, "backend", name)
		} else {
			log.Info("no generation backend serves this capability: its tasks wait until their timeout and are refunded (see --backends-config)", "capability", c)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up ready check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		if errors.Is(err, ledger.ErrFenced) {
			// As when it loses its Lease: restarted, it campaigns again instead of idling as a non-authority.
			log.Error(err, "exiting: another manager took over the points ledger")
		} else {
			log.Error(err, "problem running manager")
		}
		os.Exit(1)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
