package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/generation"
	"github.com/videogen-dev/videogen-operator/ledger"
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
}

// VideoTaskReconciler prices and freezes tasks, runs their two stages on a backend, and settles
// their points when they end.
type VideoTaskReconciler struct {
	client.Client
	// APIReader reads around the cache before a task is failed for a missing template.
	APIReader client.Reader
	Ledger    *ledger.Ledger
	Backends  generation.Router
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Config    TaskConfig

	settling *settlingTasks // shared with the PointAccount controller (Setup)
	written  writtenVersions
}

// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=templates,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The Kubernetes Job backend runs stages as Jobs owned by their task and reads pod results.
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=videotasks/finalizers,verbs=update

// Reconcile moves a task one step through Pending → Queued → Running → Succeeded/Failed.
func (r *VideoTaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	task := &videogenv1alpha1.VideoTask{}
	if err := r.Get(ctx, req.NamespacedName, task); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.forget(req.NamespacedName) // deleted, or closed and out of the cache
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.stale(task) {
		// The cache has not caught up with our last write; its event brings the task back.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if !task.DeletionTimestamp.IsZero() {
		// The points of a deleted task are released by the PointAccount controller's sweep.
		return ctrl.Result{}, nil
	}
	var (
		res    ctrl.Result
		err    error
		before = markProgress(&task.Status)
	)
	switch phase := task.Status.Phase; {
	case phase.Terminal():
		res, err = r.reconcileFinished(ctx, task)
	case phase == "" || phase == videogenv1alpha1.TaskPending:
		res, err = r.accept(ctx, task)
	default:
		res, err = r.reconcileActive(ctx, task)
	}
	if err == nil {
		r.recordProgress(before, task) // every path that changes the status writes it or fails
	}
	if apierrors.IsConflict(err) {
		// Our copy was stale; the next reconcile starts from the newer object.
		logf.FromContext(ctx).V(1).Info("conflict writing task status, retrying")
		return ctrl.Result{RequeueAfter: 50 * time.Millisecond}, nil
	}
	return res, err
}

// SetupWithManager registers the controller.
func (r *VideoTaskReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := indexTasksAwaitingFreeze(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("videotask").
		Watches(&videogenv1alpha1.VideoTask{}, r.enqueueTasks()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.MaxConcurrentReconciles)}).
		Complete(r)
}
