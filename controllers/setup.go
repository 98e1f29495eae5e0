// Package controllers holds one reconciler per kind of videogen.dev: VideoTask, PointAccount,
// PointTopUp, ShortTemplate and PaymentEvent. Setup wires them all into a manager.
package controllers

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/videogen-dev/videogen-operator/generation"
	"github.com/videogen-dev/videogen-operator/ledger"
	"github.com/videogen-dev/videogen-operator/netguard"
	"github.com/videogen-dev/videogen-operator/taskwebhooks"
	"github.com/videogen-dev/videogen-operator/webhooksecrets"
)

// Options configures every controller.
type Options struct {
	Task            TaskConfig
	HoldGracePeriod time.Duration
	// ReservationTTL: see PointAccountReconciler.ReservationTTL.
	ReservationTTL time.Duration
	Backends       generation.Router
	PaymentEvents  PaymentEventOptions
	Webhooks       WebhookConfig
	// MaxUnsettledTasks bounds the tasks of one account that hold points at once; a task applied
	// past it waits Pending (0: ledger.DefaultMaxHolds).
	MaxUnsettledTasks int
}

// DefaultOptions are the manager's defaults (see cmd/manager flags).
func DefaultOptions() Options {
	return Options{
		Task: TaskConfig{
			DefaultPrice:            10,
			DefaultTimeout:          30 * time.Minute,
			FinishedTTL:             24 * time.Hour,
			PollInterval:            2 * time.Second,
			MaxConcurrentReconciles: 8,
			TransitionEvents:        true,
		},
		HoldGracePeriod: 2 * time.Minute,
		ReservationTTL:  30 * time.Second,
		Backends:        generation.Routes{},
		Webhooks: WebhookConfig{
			Schedule:        taskwebhooks.DefaultSchedule,
			Sender:          taskwebhooks.NewSender(netguard.Policy{}, 10*time.Second),
			SecretNamespace: "videogen-system",
			Concurrency:     DefaultWebhookConcurrency,
		},
	}
}

// Setup registers all controllers with mgr, sharing one Ledger so that every point movement of
// this process is coalesced per account, and the finished-task collector. Build mgr with
// CacheByObject in its cache options so that closed tasks stay out of its cache.
func Setup(mgr ctrl.Manager, opts Options) (*ledger.Ledger, error) {
	ledgerOpts := []ledger.Option{ledger.WithCache(mgr.GetClient())}
	if opts.MaxUnsettledTasks > 0 {
		ledgerOpts = append(ledgerOpts, ledger.WithMaxHolds(opts.MaxUnsettledTasks))
	}
	l := ledger.New(mgr.GetClient(), mgr.GetAPIReader(), ledgerOpts...)
	settling := newSettlingTasks()
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
			Recorder: mgr.GetEventRecorder("videotask-controller"), Config: opts.Task, settling: settling,
		}},
		{"PointAccount", &PointAccountReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l,
			Recorder: mgr.GetEventRecorder("pointaccount-controller"), HoldGracePeriod: opts.HoldGracePeriod,
			ReservationTTL: opts.ReservationTTL, settling: settling,
		}},
		{"PointTopUp", &PointTopUpReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Ledger: l,
			Recorder: mgr.GetEventRecorder("pointtopup-controller"),
		}},
		{"Template", &TemplateReconciler{Client: mgr.GetClient(), Backends: opts.Backends, DefaultPrice: opts.Task.DefaultPrice}},
		{"ShortTemplate", &ShortTemplateReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("shorttemplate-controller")}},
		{"VideoTask webhooks", &VideoTaskWebhookReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Secrets:  &webhooksecrets.Store{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: opts.Webhooks.SecretNamespace},
			Recorder: mgr.GetEventRecorder("videotask-webhook-controller"), Config: opts.Webhooks,
		}},
		{"PaymentEvent", &PaymentEventReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: mgr.GetEventRecorder("paymentevent-controller"), Options: opts.PaymentEvents,
		}},
	}
	tasksByPhase.use(mgr.GetClient(), mgr.Elected())
	for _, s := range steps {
		if err := s.r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", s.name, err)
		}
	}
	if opts.Task.FinishedTTL > 0 {
		c := &finishedTaskCollector{client: mgr.GetClient(), reader: mgr.GetAPIReader(), ttl: opts.Task.FinishedTTL, clock: clock.RealClock{}}
		if err := mgr.Add(c); err != nil {
			return nil, fmt.Errorf("adding the finished-task collector: %w", err)
		}
	}
	return l, nil
}
