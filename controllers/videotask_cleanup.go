package controllers

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// A task carries FinalizerCancelWork only while a stage of it runs at a backend: deleting the
// task then cancels that work before the task goes. A task that runs no stage (queued, or ended)
// has nothing to clean up and no finalizer, so most fast tasks never cost the writes.

// guardWork puts the finalizer on a task that has a stage running at a backend. If the task is
// being deleted already (no finalizer can be added then), the work is cancelled at once.
func (r *VideoTaskReconciler) guardWork(ctx context.Context, task *videogenv1alpha1.VideoTask, b generation.Backend, tmpl catalog.Template) error {
	if controllerutil.ContainsFinalizer(task, videogenv1alpha1.FinalizerCancelWork) || !runningStage(task) {
		return nil
	}
	orig := task.DeepCopy()
	controllerutil.AddFinalizer(task, videogenv1alpha1.FinalizerCancelWork)
	err := r.patchFinalizers(ctx, task, orig)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		// Deleted (or being deleted) since the stage started: stop its work now.
		for _, st := range task.Status.Stages {
			if st.State == videogenv1alpha1.StageRunning && st.Handle != "" {
				r.cancelWork(ctx, b, r.work(task, tmpl, st.Name), st.Handle)
			}
		}
		return nil
	}
	return err
}

// releaseWork takes the finalizer off a task that has no stage running any more.
func (r *VideoTaskReconciler) releaseWork(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	if !controllerutil.ContainsFinalizer(task, videogenv1alpha1.FinalizerCancelWork) {
		return nil
	}
	orig := task.DeepCopy()
	controllerutil.RemoveFinalizer(task, videogenv1alpha1.FinalizerCancelWork)
	return client.IgnoreNotFound(r.patchFinalizers(ctx, task, orig))
}

// patchFinalizers writes task's finalizers over orig's, if task is still at orig's
// resourceVersion, and tells the ledger of the copy that landed, as writeStatus does: a
// reconcile from a cache that has not seen it yet then waits for it (the view is stale) instead
// of patching again from the older copy and conflicting.
func (r *VideoTaskReconciler) patchFinalizers(ctx context.Context, task, orig *videogenv1alpha1.VideoTask) error {
	if err := r.Patch(ctx, task, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.Ledger.Observe(task)
	return nil
}

// finalize cancels the backend work of a deleted task, then lets it go; its points were held by
// the task itself, so its hold ends with it (a refund). A backend that cannot be reached holds
// the deletion for at most CancelGrace: its work then runs to the backend's own deadline.
func (r *VideoTaskReconciler) finalize(ctx context.Context, task *videogenv1alpha1.VideoTask) (ctrl.Result, error) {
	// A success deleted while its charge waited is never ended by us: forget its status.
	r.ends.Delete(task.UID)
	if !controllerutil.ContainsFinalizer(task, videogenv1alpha1.FinalizerCancelWork) {
		r.cancelUnguarded(ctx, task)
		return ctrl.Result{}, nil
	}
	log := logf.FromContext(ctx)
	if !task.Status.Phase.Terminal() {
		name, b, ok := r.Backends.Route(task.Spec.Capability)
		var failed error
		if ok {
			failed = r.cancelUnended(ctx, task, name, b)
		} else {
			name, failed = "the backends its stages run at", r.cancelRecorded(ctx, task)
		}
		if failed != nil {
			waited := r.Clock.Since(task.DeletionTimestamp.Time)
			if waited < r.Config.CancelGrace {
				log.Info("cancelling a deleted task's work failed; retrying", "backend", name, "error", failed.Error())
				return ctrl.Result{RequeueAfter: min(5*time.Second, r.Config.CancelGrace-waited)}, nil
			}
			r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, "CancelFailed", "Delete",
				"Could not cancel the work at %s within %s (%v); the task goes, its work runs to the backend's own deadline", name, r.Config.CancelGrace, failed)
		}
	}
	// Held (not waiting for a charge): once the task goes, its hold ends with nothing charged.
	view, err := r.Ledger.View(task)
	released := err == nil && !view.Stale && view.Standing == ledger.Held && !task.Status.Phase.Terminal()
	if err := r.releaseWork(ctx, task); err != nil {
		return ctrl.Result{}, err
	}
	if released {
		r.tellHoldReleased(ctx, task, view.Price)
	}
	return ctrl.Result{}, nil
}

// tellHoldReleased tells the account's readers (kubectl describe pointaccount) that a task was
// deleted before it ended, so its hold ended with nothing charged: the task, the only record of
// that hold, is about to go.
func (r *VideoTaskReconciler) tellHoldReleased(ctx context.Context, task *videogenv1alpha1.VideoTask, points int64) {
	acct := &videogenv1alpha1.PointAccount{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		logf.FromContext(ctx).Info("a deleted task's hold ended; its account could not be read to tell it", "points", points, "error", err.Error())
		return
	}
	phase := task.Status.Phase
	if phase == "" {
		phase = videogenv1alpha1.TaskPending
	}
	r.Recorder.Eventf(acct, task, corev1.EventTypeNormal, EventHoldReleased, "Release",
		"Task %s was deleted before it ended (%s): the %d points it held are available again; nothing was charged", task.Name, phase, points)
}

// cancelUnguarded stops, once and by key, the work of every stage not ended of a task seen deleted
// without FinalizerCancelWork. Such a task is seen only while another finalizer keeps it (a
// delete with propagation Foreground or Orphan: the garbage collector's finalizer, taken off a
// moment later), and a reconcile may have started a stage just before: its status write landed
// and the finalizer patch met the deletion (a conflict), or the status write itself met it (the
// stage's handle in no status). Nothing else would stop that work: the task goes, its hold ends
// with it, and the stage would run unpaid to its deadline. One try each: the task goes whatever
// the backend says, and stopping work that was never submitted is no error.
func (r *VideoTaskReconciler) cancelUnguarded(ctx context.Context, task *videogenv1alpha1.VideoTask) {
	if r.Backends == nil || task.Status.Phase.Terminal() {
		return
	}
	name, b, ok := r.Backends.Route(task.Spec.Capability)
	if !ok {
		if err := r.cancelRecorded(ctx, task); err != nil {
			logf.FromContext(ctx).Error(err, "cancelling the work of a task deleted before its finalizer")
		}
		return
	}
	if err := r.cancelUnended(ctx, task, name, b); err != nil {
		logf.FromContext(ctx).Error(err, "cancelling the work of a task deleted before its finalizer")
	}
}

// cancelUnended asks b, backend's, to stop the work of every stage of task that has not ended, recorded or
// not, each for at most CancelTimeout, and returns the last error. A stage not ended may run at
// the backend without its handle, or any record of it, in the status (a Submit that landed when
// the status write recording it was lost or failed): backends find such work by its key (an
// empty handle), and stopping work that was never submitted is no error.
func (r *VideoTaskReconciler) cancelUnended(ctx context.Context, task *videogenv1alpha1.VideoTask, backend string, b generation.Backend) error {
	var failed error
	for _, name := range videogenv1alpha1.Stages {
		at, handle := b, ""
		if i := slices.IndexFunc(task.Status.Stages, func(st videogenv1alpha1.StageStatus) bool { return st.Name == name }); i >= 0 {
			st := task.Status.Stages[i]
			if st.State == videogenv1alpha1.StageSucceeded && st.Backend != "" && !sameServer(st, backend, b) {
				// Succeeded at another backend (an analyze, before the routes changed): a
				// reroute may have been under way, running it again at b first (see
				// analyzedElsewhere), its Submit landed and its status write lost (to this very
				// deletion). Stop at b what it would have submitted, by key.
				if err := r.cancelWork(ctx, b, r.work(task, catalog.Template{}, name), ""); err != nil {
					failed = err
				}
				continue
			}
			if st.State != videogenv1alpha1.StageRunning && st.State != videogenv1alpha1.StagePending {
				continue
			}
			at, handle = r.stopWhere(ctx, r.work(task, catalog.Template{}, name), st, backend, b) // a handle only at the backend that issued it
			if at != b && handle != "" {
				// Recorded at another backend, still configured: a reroute to b may have been
				// under way, its cancel there and its Submit at b landed, its status write lost
				// (to this very deletion). Stop at b what it would have submitted, by key.
				moved := r.work(task, catalog.Template{}, name)
				moved.Key = generation.ReroutedKey(generation.WorkKey(task.Namespace, task.Name, string(task.UID), name), st.Reroutes+1)
				if err := r.cancelWork(ctx, b, moved, ""); err != nil {
					failed = err
				}
			}
		}
		if err := r.cancelWork(ctx, at, r.work(task, catalog.Template{}, name), handle); err != nil {
			failed = err
		}
	}
	return failed
}

// cancelRecorded asks, when no backend serves task's capability any more (it was withdrawn
// across a restart), the backend each running stage of task was submitted to, if it is still
// configured (backendOf: under the name and server the stage records, or at its http server
// under another name), to stop it, each for at most CancelTimeout, and returns the last error.
// Without it the task's work would run on there, unpaid, to its deadline once the task goes. A
// stage whose backend is no longer configured runs to its deadline: nothing here can reach it,
// but a Job backend's Job (deleteOrphanedJob).
func (r *VideoTaskReconciler) cancelRecorded(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	var failed error
	for _, st := range task.Status.Stages {
		if st.State != videogenv1alpha1.StageRunning || st.Handle == "" {
			continue
		}
		if _, at, ok := r.backendOf(st); ok {
			if err := r.cancelWork(ctx, at, r.work(task, catalog.Template{}, st.Name), st.Handle); err != nil {
				failed = err
			}
		} else {
			r.deleteOrphanedJob(ctx, r.work(task, catalog.Template{}, st.Name), st, nil)
		}
	}
	return failed
}

// runningStage reports whether a stage of the task runs at a backend.
func runningStage(task *videogenv1alpha1.VideoTask) bool {
	for _, st := range task.Status.Stages {
		if st.State == videogenv1alpha1.StageRunning && st.Handle != "" {
			return true
		}
	}
	return false
}
