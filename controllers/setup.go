// Package controllers holds one reconciler per kind of videogen.dev: VideoTask, PointAccount,
// PointTopUp, ShortTemplate and PaymentEvent, and one that deletes a deleted account's API keys
// and webhook signing Secret. Setup wires them all into a manager.
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// The elected manager points the ledger's Service at itself (ledger.Endpoint, --ledger-service).
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=videogen-system,resources=endpointslices,verbs=get;create;update

// Options configures every controller.
type Options struct {
	Task          TaskConfig
	Ledger        LedgerOptions
	Backends      generation.Router
	PaymentEvents PaymentEventOptions
	Webhooks      WebhookConfig
	// Clock is the one clock of the ledger, every reconciler and the finished-task collector
	// (nil: the real clock); a test passes a fake one to drive timeouts, retries and TTLs.
	Clock clock.WithTicker
}

// LedgerOptions configure the ledger (see ledger.Config).
type LedgerOptions struct {
	// SigningKey signs the admissions of the tasks the ledger creates; every manager replica
	// must have the same (ledger.LoadOrCreateKey).
	SigningKey []byte
	// Identity names this manager in the accounts' status.authority (default: host and a
	// random suffix).
	Identity string
	// WriteInterval is the least time between two writes of one account.
	WriteInterval time.Duration
	// Lease reads the leader Lease: whether this manager holds it, in which term (nil without
	// leader election); see ledger.Config.Lease.
	Lease func(context.Context) (ledger.LeaseTerm, error)
}

// DefaultOptions are the manager's defaults (see cmd/manager flags).
func DefaultOptions() Options {
	return Options{
		Task: TaskConfig{
			DefaultPrice:            10,
			DefaultTimeout:          30 * time.Minute,
			FinishedTTL:             24 * time.Hour,
			PollInterval:            2 * time.Second,
			MaxConcurrentReconciles: 32, // docs/benchmarks.md: the control plane spends less per task at 32 than at 8
			TransitionEvents:        true,
		},
		Ledger:   LedgerOptions{WriteInterval: time.Second},
		Backends: generation.Routes{},
		Webhooks: WebhookConfig{
			Schedule:        outbound.DefaultSteps,
			Client:          outbound.NewGuardedClient(netguard.Policy{}, 10*time.Second),
			SecretNamespace: "videogen-system",
			Concurrency:     DefaultWebhookConcurrency,
		},
	}
}

// Setup registers the ledger (it runs in the elected manager only), all controllers, and the
// finished-task collector with mgr, and returns the ledger (to serve it to the REST apiserver:
// ledger.Handler). Build mgr with CacheByObject in its cache options so that closed tasks stay
// out of its cache.
func Setup(mgr ctrl.Manager, opts Options) (*ledger.Ledger, error) {
	signer, err := ledger.NewSigner(opts.Ledger.SigningKey)
	if err != nil {
		return nil, err
	}
	if opts.Ledger.Identity == "" {
		opts.Ledger.Identity = ledger.NewIdentity()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	l := ledger.New(ledger.Config{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(), Signer: signer,
		Identity: opts.Ledger.Identity, WriteInterval: opts.Ledger.WriteInterval, Clock: opts.Clock,
		Logger: mgr.GetLogger().WithName("ledger"), Recorder: mgr.GetEventRecorder("points-ledger"), Lease: opts.Ledger.Lease,
	})
	if err := mgr.Add(l); err != nil {
		return nil, fmt.Errorf("adding the ledger: %w", err)
	}
	if opts.Backends == nil {
		opts.Backends = generation.Routes{}
	}
	type setupper interface{ SetupWithManager(ctrl.Manager) error }
	steps := []struct {
		name string
		r    setupper
	}{
		{"VideoTask", &VideoTaskReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l, Backends: opts.Backends,
			Recorder: mgr.GetEventRecorder("videotask-controller"), Config: opts.Task, Clock: opts.Clock,
		}},
		{"PointAccount", &PointAccountReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), KeyNamespace: opts.Webhooks.SecretNamespace,
			Ledger: l, Recorder: mgr.GetEventRecorder("pointaccount-controller"),
		}},
		{"PointTopUp", &PointTopUpReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l,
			Recorder: mgr.GetEventRecorder("pointtopup-controller"), Clock: opts.Clock,
		}},
		{"Template", &TemplateReconciler{Client: mgr.GetClient(), Backends: opts.Backends, DefaultPrice: opts.Task.DefaultPrice}},
		{"ShortTemplate", &ShortTemplateReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("shorttemplate-controller")}},
		{"VideoTask webhooks", &VideoTaskWebhookReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Secrets: &webhooksecrets.Store{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: opts.Webhooks.SecretNamespace, Clock: opts.Clock,
			},
			Recorder: mgr.GetEventRecorder("videotask-webhook-controller"), Config: opts.Webhooks, Clock: opts.Clock,
		}},
		{"orphaned Secrets", &OrphanedSecretReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: opts.Webhooks.SecretNamespace,
		}},
		{"PaymentEvent", &PaymentEventReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("paymentevent-controller"), Options: opts.PaymentEvents, Clock: opts.Clock,
		}},
	}
	tasksByPhase.use(mgr.GetClient(), mgr.Elected())
	for _, s := range steps {
		if err := s.r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", s.name, err)
		}
	}
	if opts.Task.FinishedTTL > 0 {
		c := &finishedTaskCollector{client: mgr.GetClient(), reader: mgr.GetAPIReader(), ttl: opts.Task.FinishedTTL, clock: opts.Clock}
		if err := mgr.Add(c); err != nil {
			return nil, fmt.Errorf("adding the finished-task collector: %w", err)
		}
	}
	return l, nil
}
