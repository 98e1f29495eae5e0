package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/catalog"
	"github.com/videogen-dev/videogen-operator/ledger"
	"github.com/videogen-dev/videogen-operator/pricing"
)

// accept prices a new task and freezes its points, then dispatches its first stage in the same
// status write. A task that cannot be priced or paid for fails without moving any points.
func (r *VideoTaskReconciler) accept(ctx context.Context, task *videogenv1alpha1.VideoTask) (ctrl.Result, error) {
	tmpl, err := r.resolveTemplate(ctx, task)
	if err != nil {
		if code, ok := invalidTemplateCode(err); ok {
			return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, code, err.Error())
		}
		return ctrl.Result{}, err
	}
	price, err := pricing.Quote(tmpl.Terms, task.Spec.Duration, r.Config.DefaultPrice)
	if err != nil {
		return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, "invalid_duration", err.Error())
	}

	ops, self := []ledger.Op{ledger.Freeze(task.Name, price)}, 0
	rsv := task.Labels[videogenv1alpha1.LabelReservation]
	if rsv != "" {
		// Admitted by the REST apiserver under a reservation: it moves the price into the
		// task's hold together with its other new tasks' within moments. Wait for that rather
		// than spend a write of our own; if it does not come (the apiserver died), do it here.
		if wait := r.awaitReservedHold(ctx, task); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		ops[0] = ledger.FreezeFrom(task.Name, price, rsv)
	} else {
		ops, self = r.freezesAhead(ctx, task, price)
	}
	res, err := r.freeze(ctx, task.Namespace, ops, self)
	var short *ledger.InsufficientBalanceError
	switch {
	case errors.As(err, &short):
		return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInsufficientBalance, "insufficient_balance",
			fmt.Sprintf("the account has %d points available and this task costs %d; ask an administrator for a top-up", short.Available, short.Required))
	case errors.Is(err, ledger.ErrAccountSuspended):
		return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonAccountSuspended, "account_suspended", err.Error())
	case errors.Is(err, ledger.ErrAccountNotFound):
		return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, "account_not_found", err.Error())
	case errors.Is(err, ledger.ErrAlreadySettled):
		// An earlier task of the same name is still on record; its record is trimmed shortly.
		return ctrl.Result{RequeueAfter: r.Config.PollInterval}, nil
	case errors.Is(err, ledger.ErrTooManyHolds):
		// The task waits Pending, in line, until others settle (the REST API answers 429).
		before := task.Status.DeepCopy()
		task.Status.Phase = videogenv1alpha1.TaskPending
		r.setCondition(task, videogenv1alpha1.ConditionAccepted, metav1.ConditionFalse, videogenv1alpha1.ReasonTooManyUnsettled,
			"The account has as many unsettled tasks as it may have; this task waits until some of them finish")
		return ctrl.Result{RequeueAfter: max(r.Config.PollInterval, 5*time.Second)}, r.writeIfChanged(ctx, task, before)
	case err != nil:
		return ctrl.Result{}, err
	}

	// The hold may predate this reconcile (the REST apiserver freezes before it creates the
	// task); the task costs what is actually held.
	price = res.Amount
	task.Status.Phase = videogenv1alpha1.TaskQueued
	task.Status.Cost = &price
	task.Status.Charge = videogenv1alpha1.ChargeFrozen
	reason, msg := videogenv1alpha1.ReasonFrozen, fmt.Sprintf("Froze %d points", price)
	if rsv != "" && res.Changed {
		// The apiserver's move may still come: the settlement record must outlive it (see
		// lateMovePossible), and the reason says so.
		reason = videogenv1alpha1.ReasonFrozenByManager
		msg = fmt.Sprintf("Froze %d points: the REST apiserver had not moved them from its reservation in time", price)
	}
	r.setCondition(task, videogenv1alpha1.ConditionAccepted, metav1.ConditionTrue, reason, msg)
	// No event: the Accepted condition says it, and an event per task start would be one more
	// apiserver write per task for what the status already shows.
	return r.advance(ctx, task, tmpl)
}

// freeze applies ops in one account write and returns the result of ops[self], with a refusal
// as the error; the other ops' refusals are theirs to meet on their own reconcile.
func (r *VideoTaskReconciler) freeze(ctx context.Context, namespace string, ops []ledger.Op, self int) (ledger.Result, error) {
	results, err := r.Ledger.Apply(ctx, namespace, ops...)
	if err != nil {
		return ledger.Result{}, err
	}
	return results[self], results[self].Err
}

// reservedHoldWait is how long a new task admitted under a reservation waits for the REST
// apiserver to move its price into its hold (creationTimestamp has one-second resolution).
const reservedHoldWait = 2 * time.Second

// awaitReservedHold returns how long to wait before looking again, or 0 to make the hold now:
// the hold is there already (the freeze is then a repeat), or the task is no longer new. It
// waits whatever the cached reservation shows: a reservation the cache has not seen yet, or
// one that looks short, does not stop the apiserver's move, and freezing here first would
// leave that move to find the task unheld.
func (r *VideoTaskReconciler) awaitReservedHold(ctx context.Context, task *videogenv1alpha1.VideoTask) time.Duration {
	if r.Clock.Since(task.CreationTimestamp.Time) >= reservedHoldWait {
		return 0
	}
	// This runs for every new task, several times while it waits: read the cache's own copy.
	acct := ledger.CachedAccount(ctx, r.Client, task.Namespace)
	if acct == nil || acct.Status.HasHold(task.Name) {
		return 0
	}
	return 100 * time.Millisecond
}

// reject ends a task that never held points.
func (r *VideoTaskReconciler) reject(ctx context.Context, task *videogenv1alpha1.VideoTask, reason, code, message string) error {
	now := metav1.NewTime(r.Clock.Now())
	task.Status.Phase = videogenv1alpha1.TaskFailed
	task.Status.CompletedAt = &now
	task.Status.Error = &videogenv1alpha1.TaskError{Code: code, Message: message}
	r.setCondition(task, videogenv1alpha1.ConditionAccepted, metav1.ConditionFalse, reason, message)
	r.setCondition(task, videogenv1alpha1.ConditionComplete, metav1.ConditionTrue, reason, message)
	task.Status.Closed = closable(task)
	if err := r.writeStatus(ctx, task); err != nil {
		return err
	}
	r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, reason, "Reject", "%s", message)
	tasksFinished.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase), reason).Inc()
	return nil
}

// resolveTemplate finds the task's template in the cache, and, before calling it missing, around
// the cache: a template created just before the task (one kubectl apply of both) may not be
// cached yet, and a missing template fails the task for good.
func (r *VideoTaskReconciler) resolveTemplate(ctx context.Context, task *videogenv1alpha1.VideoTask) (catalog.Template, error) {
	tmpl, err := catalog.Resolve(ctx, r.Client, task.Namespace, task.Spec.Capability, task.Spec.TemplateRef)
	if errors.Is(err, catalog.ErrTemplateNotFound) && r.APIReader != nil {
		tmpl, err = catalog.Resolve(ctx, r.APIReader, task.Namespace, task.Spec.Capability, task.Spec.TemplateRef)
	}
	return tmpl, err
}

func invalidTemplateCode(err error) (string, bool) {
	var wrong *catalog.WrongCapabilityError
	switch {
	case errors.Is(err, catalog.ErrTemplateNotFound):
		return "template_not_found", true
	case errors.As(err, &wrong):
		return "template_capability_mismatch", true
	}
	return "", false
}

func (r *VideoTaskReconciler) setCondition(task *videogenv1alpha1.VideoTask, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: task.Generation,
	})
	task.Status.ObservedGeneration = task.Generation
}
