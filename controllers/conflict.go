package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// conflictRetry is how soon a reconcile whose write met a newer copy runs again.
const conflictRetry = 50 * time.Millisecond

// requeueOnConflict turns a write that met a newer copy of its object into a quiet retry (the
// next reconcile starts from the newer object) instead of a "Reconciler error" with a stack
// trace. Every other result passes through. what names the write for the debug log.
func requeueOnConflict(ctx context.Context, what string, res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		logf.FromContext(ctx).V(1).Info("conflict writing " + what + ", retrying")
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}
