package controllers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// A task's end is one status write: its terminal phase and its charge (Deducted or Refunded),
// the decision. The ledger applies the decision right after, coalesced with the account's
// other moves, and nothing waits for it. The hold still in the account is the durable mark of
// a settle not yet applied: if the manager dies in between, the PointAccount controller finds
// a hold whose task has ended and settles it as the task's status says.

// settleWithin is how long a settle may wait to share its account write with others. Nothing
// waits on it: the task's status already says where its points go, and until then they show
// as frozen in the account.
const settleWithin = 250 * time.Millisecond

// settlingTasks are the tasks whose settle this manager has decided and not yet applied. The
// PointAccount controller leaves their holds alone: the settle is on its way.
type settlingTasks struct {
	mu    sync.Mutex
	tasks map[types.NamespacedName]struct{}
}

func newSettlingTasks() *settlingTasks {
	return &settlingTasks{tasks: map[types.NamespacedName]struct{}{}}
}

func (s *settlingTasks) begin(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[key] = struct{}{}
}

func (s *settlingTasks) end(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, key)
}

func (s *settlingTasks) has(namespace, name string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tasks[types.NamespacedName{Namespace: namespace, Name: name}]
	return ok
}

// writtenVersions remembers the resourceVersion of the last status this controller wrote for
// each task until its cache shows it. A reconcile that reads an older copy (the informer has
// not caught up) waits instead of acting on it: a stale Pending copy of a task that has just
// ended, its hold settled and its settlement record forgotten, would freeze its price again.
// (The status write would then conflict, but the hold would be made.)
type writtenVersions struct {
	mu sync.Mutex
	rv map[types.NamespacedName]string
}

func (w *writtenVersions) wrote(task *videogenv1alpha1.VideoTask) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[types.NamespacedName]string{}
	}
	w.rv[types.NamespacedName{Namespace: task.Namespace, Name: task.Name}] = task.ResourceVersion
}

// stale reports whether cached is older than the last status written for it, and forgets the
// written version once the cache has caught up.
func (w *writtenVersions) stale(cached *videogenv1alpha1.VideoTask) bool {
	key := types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	want, ok := w.rv[key]
	if !ok {
		return false
	}
	if cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, want); err == nil && cmp < 0 {
		return true
	}
	delete(w.rv, key)
	return false
}

func (w *writtenVersions) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}

// writeStatus updates the task's status and remembers the version written.
func (r *VideoTaskReconciler) writeStatus(ctx context.Context, task *videogenv1alpha1.VideoTask) error {
	if err := r.Status().Update(ctx, task); err != nil {
		return err
	}
	r.written.wrote(task)
	return nil
}

// applySettlement hands the settle of an ended task, whose status already says the outcome, to
// the ledger, and deals with the answer when it comes. task is the object as written; it is
// not shared.
func (r *VideoTaskReconciler) applySettlement(ctx context.Context, task *videogenv1alpha1.VideoTask, want videogenv1alpha1.SettlementOutcome) {
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	log := logf.FromContext(ctx)
	done := r.Ledger.StartWithin(settleWithin, task.Namespace, ledger.Settle(task.Name, want))
	go func() {
		defer r.settling.end(key)
		res := (<-done)[0]
		switch {
		case res.Err == nil && res.Outcome == want:
			r.forgetSettlement(task)
			if res.Changed {
				r.recordOutcome(task, res)
			}
		case res.Err == nil:
			// An earlier settle of this name stands (the ledger never settles twice); make the
			// status say what happened to the points.
			log.Error(nil, "the ledger had settled this task differently; correcting its charge", "recorded", res.Outcome, "decided", want)
			cost := res.Amount
			if r.correctCharge(log, task, chargeOf(res.Outcome), &cost) {
				r.forgetSettlement(task)
			}
		case errors.Is(res.Err, ledger.ErrNoHold):
			// Nothing was held and nothing is on record: the hold was released (the task was
			// deleted, or its points were never frozen under this name). Say so.
			if r.correctCharge(log, task, "", task.Status.Cost) {
				r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, "NoHold", "Settle", "No frozen points were found for this task; nothing was charged")
			}
		default:
			// The write failed or was given up; the task's hold stays, and the PointAccount
			// controller settles it from the task's status.
			log.Error(res.Err, "settling the task's points; the PointAccount controller will settle them from its status")
		}
	}()
}

// correctCharge rewrites an ended task's charge after the ledger answered otherwise than the
// status said. It reports whether the status now says it.
func (r *VideoTaskReconciler) correctCharge(log logr.Logger, task *videogenv1alpha1.VideoTask, charge videogenv1alpha1.ChargeState, cost *int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	task.Status.Charge, task.Status.Cost = charge, cost
	if err := r.writeStatus(ctx, task); err != nil {
		log.Error(err, "correcting a task's charge")
		return false
	}
	return true
}

// forgetSettlement lets the account's next write drop the task's settlement record, now that
// the task's status shows the settlement; not while a REST apiserver's late move may still
// land (lateMovePossible).
func (r *VideoTaskReconciler) forgetSettlement(task *videogenv1alpha1.VideoTask) {
	if !lateMovePossible(task, r.Clock.Now()) {
		r.Ledger.Piggyback(task.Namespace, ledger.ForgetSettlement(task.Name))
	}
}

// lateMoveWindow bounds how late a REST apiserver's move of a task's reserved price into its
// hold can land: its create (10 s at most), the move's linger (500 ms at most by default) and
// the ledger's commit timeout (30 s), each possibly behind another batch of the same account,
// with a margin.
const lateMoveWindow = 2 * time.Minute

// lateMovePossible reports whether the apiserver's move for a task may still land: the task was
// admitted under a reservation, the manager froze its price itself, and the window is not over.
// Its settlement record must stay until then: a move that found neither hold nor record would
// freeze the price again for a task that has ended.
func lateMovePossible(task *videogenv1alpha1.VideoTask, now time.Time) bool {
	if task.Labels[videogenv1alpha1.LabelReservation] == "" || now.Sub(task.CreationTimestamp.Time) >= lateMoveWindow {
		return false
	}
	c := meta.FindStatusCondition(task.Status.Conditions, videogenv1alpha1.ConditionAccepted)
	return c != nil && c.Reason == videogenv1alpha1.ReasonFrozenByManager
}

// settlementFor is the ledger outcome a task's terminal phase decides.
func settlementFor(phase videogenv1alpha1.TaskPhase) videogenv1alpha1.SettlementOutcome {
	if phase == videogenv1alpha1.TaskSucceeded {
		return videogenv1alpha1.SettlementDeducted
	}
	return videogenv1alpha1.SettlementRefunded
}

// settlementOf is the settlement outcome a settled charge (Deducted or Refunded) shows.
func settlementOf(c videogenv1alpha1.ChargeState) videogenv1alpha1.SettlementOutcome {
	if c == videogenv1alpha1.ChargeDeducted {
		return videogenv1alpha1.SettlementDeducted
	}
	return videogenv1alpha1.SettlementRefunded
}

// chargeOf is the task charge that shows a settlement outcome.
func chargeOf(o videogenv1alpha1.SettlementOutcome) videogenv1alpha1.ChargeState {
	if o == videogenv1alpha1.SettlementDeducted {
		return videogenv1alpha1.ChargeDeducted
	}
	return videogenv1alpha1.ChargeRefunded
}
