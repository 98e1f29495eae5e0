package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// TaskConfig holds the manager flags that shape a task's life.
type TaskConfig struct {
	// DefaultPrice is the system default price in points.
	DefaultPrice int64
	// DefaultTimeout bounds a task that sets no spec.timeout.
	DefaultTimeout time.Duration
	// FinishedTTL is how long a finished task is kept before it is deleted.
	FinishedTTL time.Duration
	// PollInterval is how often a running stage is observed.
	PollInterval time.Duration
	// MaxConcurrentReconciles bounds parallel task reconciles (backend calls can be slow).
	MaxConcurrentReconciles int
	// TransitionEvents emits a Normal event for each step a task takes (points frozen, each
	// stage started, succeeded and charged). Failures always get a Warning event.
	TransitionEvents bool
	// CancelGrace bounds how long a deleted task waits for its backend to cancel its work.
	CancelGrace time.Duration
	// CancelTimeout bounds each call that cancels a stage at its backend, and the last look at
	// the stage of a task that must stop (cancelled or timed out): an unreachable backend must
	// not hold a task's end (default 5s).
	CancelTimeout time.Duration
	// BackendCallTimeout bounds each Submit and Observe (default 20s): a backend that hangs holds
	// a task worker that long, not for its client's every retry, and its task shows
	// BackendUnavailable (a Warning event) after one bounded call.
	BackendCallTimeout time.Duration
}

// VideoTaskReconciler prices tasks and has the ledger freeze them, runs their two stages on a
// backend, and ends them: refunded in their own status write, or charged by the ledger first.
type VideoTaskReconciler struct {
	client.Client
	// APIReader reads around the cache before a task is failed for a missing template.
	APIReader client.Reader
	Ledger    *ledger.Ledger
	Backends  generation.Router
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Config    TaskConfig

	// ends are the terminal statuses of succeeded tasks whose charge waits for the account's
	// next write, by task UID: written when it lands (after a restart, rebuilt from the
	// charge's journal entry instead).
	ends sync.Map
	// calls are the cancel funcs of the backend calls under way, by task UID: a cancel request
	// cuts its task's call short instead of waiting for a hung backend's retries.
	calls sync.Map
}

// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=videogen.dev,resources=templates,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The Kubernetes Job backend runs stages as Jobs owned by their task and reads pod results.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reconcile moves a task one step through Pending → Queued → Running → Succeeded/Failed.
func (r *VideoTaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	task := &videogenv1alpha1.VideoTask{}
	if err := r.Get(ctx, req.NamespacedName, task); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !task.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, task)
	}
	view, err := r.Ledger.View(task)
	switch {
	case errors.Is(err, ledger.ErrNotReady):
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case errors.Is(err, ledger.ErrAccountNotFound):
		if task.Status.Phase.Terminal() {
			return r.reconcileFinished(ctx, task)
		}
		return r.noAccount(ctx, task)
	case err != nil:
		return ctrl.Result{}, err
	case view.Stale:
		// The cache has not caught up with a newer copy the ledger has seen; its event brings
		// the task back (the requeue is a safety net).
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	var (
		res    ctrl.Result
		before = markProgress(&task.Status)
	)
	switch view.Standing {
	case ledger.Unknown:
		// The ledger's event for this task has not come yet (a moment: both watch the same).
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	case ledger.Settled:
		res, err = r.reconcileFinished(ctx, task)
	case ledger.Overdrawn:
		err = r.reject(ctx, task, videogenv1alpha1.ReasonInsufficientBalance, "insufficient_balance",
			"the account's points no longer covered this task when it was counted; nothing was charged")
	case ledger.Charging:
		// Its charge waits for the account's next write; the ledger requeues the task when it lands.
		res = ctrl.Result{RequeueAfter: 10 * time.Second}
	case ledger.Charged:
		res, err = r.endCharged(ctx, task, view)
	case ledger.Unadmitted:
		res, err = r.accept(ctx, task, view)
	default: // Held
		if task.Status.Charge != videogenv1alpha1.ChargeFrozen {
			res, err = r.accept(ctx, task, view) // created by the ledger: record its hold
		} else {
			res, err = r.reconcileActive(ctx, task, view)
		}
	}
	if err == nil {
		r.recordProgress(before, task) // every path that changes the status writes it or fails
	}
	return requeueOnConflict(ctx, "task status", res, err)
}

// writeStatus updates the task's status and tells the ledger what it now says.
func (r *VideoTaskReconciler) writeStatus(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	if err := r.Status().Update(ctx, task); err != nil {
		return err
	}
	r.Ledger.Observe(task)
	return nil
}

// SetupWithManager registers the controller. The ledger requeues tasks whose charge landed or
// that it found overdrawn.
func (r *VideoTaskReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Config.CancelGrace <= 0 {
		r.Config.CancelGrace = 2 * time.Minute
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("videotask").
		Watches(&videogenv1alpha1.VideoTask{}, r.enqueueTasks()).
		WatchesRawSource(source.Channel(r.Ledger.TaskEvents(), &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Complete(r)
}
