package controllers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// enqueueTasks enqueues VideoTasks as handler.EnqueueRequestForObject does, except closed
// tasks: nothing is left to do for them (the finished-task collector deletes them at their
// TTL). The manager's cache normally holds no closed task at all (CacheByObject); this keeps a
// manager built without that selector from queueing thousands of them at every start.
func (r *VideoTaskReconciler) enqueueTasks() handler.EventHandler {
	base := &handler.EnqueueRequestForObject{}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if task, ok := e.Object.(*videogenv1alpha1.VideoTask); ok && task.Status.Closed {
				return
			}
			base.Create(ctx, e, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if task, ok := e.ObjectNew.(*videogenv1alpha1.VideoTask); ok && task.Status.Closed && task.DeletionTimestamp.IsZero() {
				return
			}
			if cancelRequested(e.ObjectNew) && !cancelRequested(e.ObjectOld) {
				r.interruptCall(e.ObjectNew.GetUID()) // its reconcile stops waiting for the backend
			}
			base.Update(ctx, e, q)
		},
		DeleteFunc:  base.Delete,
		GenericFunc: base.Generic,
	}
}

func cancelRequested(obj client.Object) bool {
	if obj == nil {
		return false
	}
	_, ok := obj.GetAnnotations()[videogenv1alpha1.AnnotationCancelRequested]
	return ok
}
