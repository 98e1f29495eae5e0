package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// finish ends a task that holds its price (view). A failure is refunded in its own status
// write: the task's hold ends with it. A success is charged by the ledger first (the account's
// spent and journal, in its next write); the task is written Succeeded, Deducted once that has
// landed (endCharged), so that a crash or a deletion in between cannot lose the charge.
func (r *VideoTaskReconciler) finish(ctx context.Context, task *videogenv1alpha1.VideoTask, before *videogenv1alpha1.VideoTaskStatus,
	view ledger.View, end outcome) (ctrl.Result, error) {
	now := metav1.NewTime(r.Clock.Now())
	task.Status.CompletedAt = &now
	price := view.Price
	task.Status.Cost = &price
	if !end.success {
		r.setCondition(task, videogenv1alpha1.ConditionFailed, metav1.ConditionTrue, end.reason, end.message)
		task.Status.Phase = videogenv1alpha1.TaskFailed
		task.Status.Error = &videogenv1alpha1.TaskError{Code: end.code, Message: end.message}
		task.Status.Charge = videogenv1alpha1.ChargeRefunded
		return r.writeEnd(ctx, task, price)
	}
	task.Status.Phase = videogenv1alpha1.TaskSucceeded
	task.Status.Result = end.result
	task.Status.Progress = 100
	task.Status.Error = nil
	task.Status.Charge = videogenv1alpha1.ChargeDeducted
	r.setCondition(task, videogenv1alpha1.ConditionSucceeded, metav1.ConditionTrue, end.reason, end.message)
	charged, err := r.Ledger.Charge(task, end.result)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !charged {
		// The ledger requeues the task when the charge has landed; this status is written then.
		r.ends.Store(task.UID, task.Status.DeepCopy())
		task.Status = *before // nothing written yet
		return ctrl.Result{RequeueAfter: chargeWait}, nil
	}
	return r.writeEnd(ctx, task, price)
}

// chargeWait is the safety net of a task waiting for its charge: the ledger requeues it
// as soon as the account write lands (about a second).
const chargeWait = 10 * time.Second

// endCharged ends a task whose charge is in the account: with the status prepared when its
// success was seen, or, after a restart, with the result the charge recorded.
func (r *VideoTaskReconciler) endCharged(ctx context.Context, task *videogenv1alpha1.VideoTask, view ledger.View) (ctrl.Result, error) {
	if st, ok := r.ends.Load(task.UID); ok {
		task.Status = *st.(*videogenv1alpha1.VideoTaskStatus).DeepCopy()
	} else {
		now := metav1.NewTime(r.Clock.Now())
		if task.Status.Phase.Terminal() {
			// The status that says Succeeded was written by hand (ours is written only from the
			// status prepared above, or, after a restart, over a status that has not ended):
			// the ledger charged it as it says, but its stages did not finish, and one still
			// running at a backend runs for nobody.
			r.cancelRunningStages(ctx, task)
			if task.Status.Phase == videogenv1alpha1.TaskSucceeded {
				return r.writeEnd(ctx, endedByHandCharged(task, view, now), view.Price)
			}
		} else {
			for _, name := range videogenv1alpha1.Stages {
				st := stageStatus(task, name)
				if st.State != videogenv1alpha1.StageSucceeded {
					st.State, st.Progress, st.CompletedAt = videogenv1alpha1.StageSucceeded, 100, &now
				}
			}
		}
		task.Status.Phase = videogenv1alpha1.TaskSucceeded
		task.Status.Result = view.Result
		task.Status.Progress = 100
		task.Status.Error = nil
		task.Status.CompletedAt = &now
		task.Status.Charge = videogenv1alpha1.ChargeDeducted
		price := view.Price
		task.Status.Cost = &price
		r.setCondition(task, videogenv1alpha1.ConditionSucceeded, metav1.ConditionTrue, videogenv1alpha1.ReasonSucceeded, "Generation finished")
	}
	return r.writeEnd(ctx, task, view.Price)
}

// endedByHandCharged is a success written by hand, charged: as it says, with its result (the
// charge's journal entry carried it, but is forgotten once the ledger saw the status say
// Deducted, so the view may have none) and its completion time, filled in only where missing
// (EndedByHand), as reconcileFinished fills in a failure.
func endedByHandCharged(task *videogenv1alpha1.VideoTask, view ledger.View, now metav1.Time) *videogenv1alpha1.VideoTask {
	if view.Result != nil {
		task.Status.Result = view.Result
	}
	if task.Status.CompletedAt == nil {
		task.Status.CompletedAt = &now
	}
	task.Status.Progress = 100
	task.Status.Error = nil
	task.Status.Charge = videogenv1alpha1.ChargeDeducted
	price := view.Price
	task.Status.Cost = &price
	if task.Status.Ending() == nil {
		endedByHand(task)
	}
	return task
}

// writeEnd writes a task's terminal status (writeTerminal) and records how it ended.
func (r *VideoTaskReconciler) writeEnd(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) (ctrl.Result, error) {
	if err := r.writeTerminal(ctx, task); err != nil {
		return ctrl.Result{}, err
	}
	r.ends.Delete(task.UID)
	c := task.Status.Ending()
	reason := ""
	if c != nil {
		reason = c.Reason
	}
	tasksFinished.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase), reason).Inc()
	taskDuration.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase)).
		Observe(task.Status.CompletedAt.Sub(task.CreationTimestamp.Time).Seconds())
	r.recordOutcome(task, price)
	return ctrl.Result{}, nil
}

// writeTerminal lets the task go (no backend work is left: its caller cancelled any stage still
// running; its finalizer comes off first, so that no write of ours follows the terminal status
// that the webhook controller acts on, and a closed task, which leaves the cache, is not left
// with it), then writes its terminal status.
func (r *VideoTaskReconciler) writeTerminal(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	status := task.Status.DeepCopy()
	if err := r.releaseWork(ctx, task); err != nil {
		return err
	}
	task.Status = *status // the patch's answer carries the stored status
	task.Status.Closed = closable(task)
	return r.writeStatus(ctx, task)
}

// reconcileFinished closes a terminal task when nothing else is to do (its webhook delivered or
// given up), and takes its finalizer off if a crash left it. The finished-task collector deletes
// closed tasks at their TTL.
func (r *VideoTaskReconciler) reconcileFinished(ctx context.Context, task *videogenv1alpha1.VideoTask) (ctrl.Result, error) {
	// A stage still running was ended by a status written by hand: every end we write stops its
	// stages first.
	canceled := r.cancelRunningStages(ctx, task)
	// A status ended by hand may lack its completion time, without which it would never be
	// closed, nor collected at the TTL.
	filledIn := task.Status.CompletedAt == nil
	if filledIn {
		at := metav1.NewTime(r.Clock.Now())
		task.Status.CompletedAt = &at
	}
	// Nor may it say why it ended: a REST client reads a failure's error.
	if task.Status.Ending() == nil {
		endedByHand(task)
		filledIn = true
	}
	if canceled || filledIn || (!task.Status.Closed && closable(task)) {
		task.Status.Closed = task.Status.Closed || closable(task)
		if err := r.writeStatus(ctx, task); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.releaseWork(ctx, task)
}

// endedByHand gives a task whose status was ended by hand the ending condition (and, for a
// failure, the error) that every end the operator writes has.
func endedByHand(task *videogenv1alpha1.VideoTask) {
	typ, msg := videogenv1alpha1.ConditionSucceeded, "The task's status was set to Succeeded by hand (kubectl edit --subresource=status), not by the operator: its points were deducted"
	if task.Status.Phase == videogenv1alpha1.TaskFailed {
		typ, msg = videogenv1alpha1.ConditionFailed, "The task's status was set to Failed by hand (kubectl edit --subresource=status), not by the operator: its points were refunded"
		if task.Status.Error == nil {
			task.Status.Error = &videogenv1alpha1.TaskError{Code: "ended_by_administrator",
				Message: "an administrator of the service ended the task; its points were refunded"}
		}
	}
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue,
		Reason: videogenv1alpha1.ReasonEndedByHand, Message: msg, ObservedGeneration: task.Generation})
}

// recordOutcome is the closing event of a task: a Normal one for a success that was charged
// (unless --task-events=false), a Warning for any other end, saying where its points went.
func (r *VideoTaskReconciler) recordOutcome(task *videogenv1alpha1.VideoTask, price int64) {
	if task.Status.Phase == videogenv1alpha1.TaskSucceeded {
		if r.Config.TransitionEvents {
			msg := "Generation finished"
			if task.Status.Result != nil && task.Status.Result.URL != "" {
				msg = fmt.Sprintf("Generation finished: %s", task.Status.Result.URL)
			}
			r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, EventSucceeded, "Settle", "%s; deducted %d points", msg, price)
		}
		return
	}
	reason, message := string(task.Status.Phase), "The task did not succeed"
	if c := task.Status.Ending(); c != nil {
		reason, message = c.Reason, c.Message
	}
	r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, reason, "Settle", "%s; refunded %d points", strings.TrimSuffix(message, "."), price)
}
