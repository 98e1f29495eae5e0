package controllers

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// enqueueTasks enqueues VideoTasks as handler.EnqueueRequestForObject does, with one change:
// a finished, settled task found by the initial list (a manager start) has nothing to do until
// its TTL runs out, so it is scheduled for then instead of now. After a restart, thousands of
// finished tasks would otherwise queue ahead of the running ones.
func (r *VideoTaskReconciler) enqueueTasks() handler.EventHandler {
	base := &handler.EnqueueRequestForObject{}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			task, ok := e.Object.(*videogenv1alpha1.VideoTask)
			pq, isPQ := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if ok && isPQ && e.IsInInitialList {
				if wait, idle := r.idleFor(task); idle {
					if wait >= 0 {
						pq.AddWithOpts(priorityqueue.AddOpts{After: wait, Priority: ptr.To(handler.LowPriority)},
							reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
					}
					return
				}
			}
			base.Create(ctx, e, q)
		},
		UpdateFunc:  base.Update,
		DeleteFunc:  base.Delete,
		GenericFunc: base.Generic,
	}
}

// idleFor reports whether a task has nothing to do until its TTL runs out, and how long that
// is (negative: nothing to do ever, the TTL is off).
func (r *VideoTaskReconciler) idleFor(task *videogenv1alpha1.VideoTask) (time.Duration, bool) {
	if !task.Status.Phase.Terminal() || task.Status.Charge == videogenv1alpha1.ChargeFrozen ||
		task.Status.CompletedAt == nil || !task.DeletionTimestamp.IsZero() || webhookDue(task) {
		return 0, false
	}
	if r.Config.FinishedTTL <= 0 {
		return -1, true
	}
	return max(0, task.Status.CompletedAt.Add(r.Config.FinishedTTL).Sub(r.Clock.Now())), true
}
