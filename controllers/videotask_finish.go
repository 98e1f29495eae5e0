package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// finish ends the task in one status write that carries its terminal phase and where its
// points go (Deducted on success, Refunded otherwise), then hands that settle to the ledger
// (see applySettlement). The write is the decision: a crash before the ledger applies it
// leaves the hold, which the PointAccount controller settles as the status says.
func (r *VideoTaskReconciler) finish(ctx context.Context, task *videogenv1alpha1.VideoTask, end outcome) (ctrl.Result, error) {
	now := metav1.NewTime(r.Clock.Now())
	task.Status.CompletedAt = &now
	if end.success {
		task.Status.Phase = videogenv1alpha1.TaskSucceeded
		task.Status.Result = end.result
		task.Status.Progress = 100
		task.Status.Error = nil
	} else {
		task.Status.Phase = videogenv1alpha1.TaskFailed
		task.Status.Error = &videogenv1alpha1.TaskError{Code: end.code, Message: end.message}
	}
	r.setCondition(task, videogenv1alpha1.ConditionComplete, metav1.ConditionTrue, end.reason, end.message)
	held := task.Status.Charge == videogenv1alpha1.ChargeFrozen
	want := settlementFor(task.Status.Phase)
	if held {
		task.Status.Charge = chargeOf(want)
	}
	task.Status.Closed = closable(task)
	key := client.ObjectKeyFromObject(task)
	if held {
		// Before the write: the task leaves the cache as it closes, and the PointAccount
		// controller must not take that for a deletion.
		r.settling.begin(key)
	}
	if err := r.writeStatus(ctx, task); err != nil {
		r.settling.end(key)
		return ctrl.Result{}, err
	}
	tasksFinished.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase), end.reason).Inc()
	taskDuration.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase)).
		Observe(now.Sub(task.CreationTimestamp.Time).Seconds())
	if held {
		r.applySettlement(ctx, task.DeepCopy(), want)
	}
	return ctrl.Result{}, nil
}

// reconcileFinished settles the points of a terminal task that still shows them Frozen (one
// ended by an older manager, which wrote the phase first and the settlement second), and
// closes the task when nothing else is to do (a task settled by an older manager, or rejected
// before any point moved). The finished-task collector deletes closed tasks at their TTL.
func (r *VideoTaskReconciler) reconcileFinished(ctx context.Context, task *videogenv1alpha1.VideoTask) (ctrl.Result, error) {
	if task.Status.Charge == videogenv1alpha1.ChargeFrozen {
		if err := r.settle(ctx, task); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !task.Status.Closed && closable(task) {
		task.Status.Closed = true
		return ctrl.Result{}, r.writeStatus(ctx, task)
	}
	return ctrl.Result{}, nil
}

// settle deducts (on success) or refunds (on failure) the frozen points of a task whose status
// says it ended with its points Frozen, once, and then records the settlement.
func (r *VideoTaskReconciler) settle(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	want := settlementFor(task.Status.Phase)
	res, err := r.Ledger.Do(ctx, task.Namespace, ledger.Settle(task.Name, want))
	switch {
	case errors.Is(err, ledger.ErrNoHold):
		// Nothing is held and nothing is on record: the points were never frozen under this
		// name or were released by the orphan sweep. Say so rather than invent a settlement.
		task.Status.Charge = ""
		task.Status.Closed = closable(task)
		if err := r.writeStatus(ctx, task); err != nil {
			return err // a stale copy conflicts here, before it says anything
		}
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, "NoHold", "Settle", "No frozen points were found for this task; nothing was charged")
		return nil
	case err != nil:
		return fmt.Errorf("settling %d points: %w", costOf(task), err)
	}
	if res.Outcome != want {
		// Cannot happen while the terminal phase is written before settling; loud if it does.
		logf.FromContext(ctx).Error(nil, "ledger recorded a different settlement than the task's phase", "recorded", res.Outcome, "phase", task.Status.Phase)
	}
	task.Status.Charge = chargeOf(res.Outcome)
	task.Status.Cost = &res.Amount
	task.Status.Closed = closable(task)
	if err := r.writeStatus(ctx, task); err != nil {
		if apierrors.IsConflict(err) {
			return err // the next reconcile repeats Settle and finds the recorded outcome
		}
		return fmt.Errorf("recording settlement: %w", err)
	}
	// The status now shows the settlement, so its record in the account may go: with the
	// account's next write rather than in a write of its own (the PointAccount controller
	// trims what is left).
	r.forgetSettlement(task)
	if res.Changed {
		r.recordOutcome(task, res)
	}
	return nil
}

// recordOutcome is the closing event of a task: a Normal one for a success that was charged
// (unless --task-events=false), a Warning for any other end, saying where its points went.
func (r *VideoTaskReconciler) recordOutcome(task *videogenv1alpha1.VideoTask, res ledger.Result) {
	if task.Status.Phase == videogenv1alpha1.TaskSucceeded && res.Outcome == videogenv1alpha1.SettlementDeducted {
		r.recordSuccess(task, res)
		return
	}
	reason, message := string(task.Status.Phase), "The task did not succeed"
	if c := meta.FindStatusCondition(task.Status.Conditions, videogenv1alpha1.ConditionComplete); c != nil {
		reason, message = c.Reason, c.Message
	}
	moved := "deducted"
	if res.Outcome == videogenv1alpha1.SettlementRefunded {
		moved = "refunded"
	}
	r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, reason, "Settle", "%s; %s %d points", strings.TrimSuffix(message, "."), moved, res.Amount)
}

func costOf(task *videogenv1alpha1.VideoTask) int64 {
	if task.Status.Cost == nil {
		return 0
	}
	return *task.Status.Cost
}
