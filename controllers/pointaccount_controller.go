package controllers

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// PointAccountReconciler keeps an account's conditions, releases holds whose task never
// appeared or was deleted and reservations whose holder stopped renewing them, settles holds
// whose task ended without its settle reaching the account (the manager died in between), and
// trims the ledger's records once they are acknowledged.
type PointAccountReconciler struct {
	client.Client
	APIReader client.Reader
	Ledger    *ledger.Ledger
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// HoldGracePeriod is how long a hold may exist without its task before it is released: the
	// REST apiserver freezes before it creates the task, and a crash in between leaves a hold.
	HoldGracePeriod time.Duration
	// ReservationTTL is how long a REST apiserver's reservation may go unrenewed before it is
	// released (its holder died). It must exceed the apiserver's fence window plus its longest
	// create (10 s + 10 s by default).
	ReservationTTL time.Duration

	orphans      orphanClock
	reservations reservationClock
	settling     *settlingTasks // shared with the VideoTask controller (Setup)
}

// recordsRecheck is how soon an account with unacknowledged records is looked at again.
const recordsRecheck = 10 * time.Second

// Reconcile brings the account's conditions and records up to date.
func (r *PointAccountReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	acct := &videogenv1alpha1.PointAccount{}
	if err := r.Get(ctx, req.NamespacedName, acct); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for state, v := range map[string]int64{"balance": acct.Status.Balance, "frozen": acct.Status.Frozen,
		"reserved": acct.Status.Reserved, "spent": acct.Status.Spent, "credited": acct.Status.Credited} {
		accountPoints.WithLabelValues(acct.Namespace, state).Set(float64(v))
	}
	if err := r.updateConditions(ctx, acct); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return ctrl.Result{}, err
	}

	now := r.Clock.Now()
	var ops []ledger.Op
	released, nextSweep, err := r.orphanHolds(ctx, acct, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, o := range released {
		ops = append(ops, o.op)
	}
	unreserved, nextExpiry, err := r.expiredReservations(ctx, acct, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	ops = append(ops, unreserved...)
	trimmed, err := r.acknowledgedTopUps(ctx, acct)
	if err != nil {
		return ctrl.Result{}, err
	}
	ops = append(ops, trimmed...)
	// Trimming settlement records moves no points: wait a little so one write trims many,
	// unless this write happens anyway or the records pile up. Most records go sooner, with
	// the account's next write (the settling controller queues their ForgetSettlement), and
	// a record's task is usually closed and so out of the cache: look them up only to trim.
	var forgotten []ledger.Op
	trimWait := trimDelay(acct.Status.Settlements, now)
	if len(acct.Status.Settlements) > 0 && (len(ops) > 0 || trimWait == 0) {
		if forgotten, err = r.acknowledgedSettlements(ctx, acct); err != nil {
			return ctrl.Result{}, err
		}
		ops = append(ops, forgotten...)
	}

	if len(ops) > 0 {
		results, err := r.Ledger.Apply(ctx, acct.Namespace, ops...)
		if err != nil {
			return ctrl.Result{}, err
		}
		for i, res := range results[:len(released)] {
			if res.Changed {
				released[i].record(r.Recorder, acct, res.Amount)
			}
		}
		for i, res := range results[len(released) : len(released)+len(unreserved)] {
			if res.Changed {
				r.Recorder.Eventf(acct, nil, corev1.EventTypeNormal, "ReservationExpired", "Release",
					"Returned %d points of reservation %q to the balance: its apiserver stopped renewing it", res.Amount, unreserved[i].Reservation())
			}
		}
	}

	var wait time.Duration
	if len(acct.Status.Settlements)+len(acct.Status.TopUps) > len(forgotten)+len(trimmed) {
		wait = recordsRecheck
	}
	for _, next := range []time.Duration{nextSweep, nextExpiry} {
		if next > 0 && (wait == 0 || next < wait) {
			wait = next
		}
	}
	if forgotten == nil && trimWait > 0 && len(acct.Status.Settlements) > 0 && (wait == 0 || trimWait < wait) {
		wait = trimWait
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// Settlement records are trimmed in batches: once the oldest is trimAge old, or when there are
// trimBatch of them.
const (
	trimAge   = 2 * time.Second
	trimBatch = 64
)

// trimDelay is how long to wait before trimming settlement records (0: now).
func trimDelay(records []videogenv1alpha1.Settlement, now time.Time) time.Duration {
	if len(records) == 0 || len(records) >= trimBatch {
		return 0
	}
	oldest := records[0].SettledAt.Time
	for _, r := range records[1:] {
		if r.SettledAt.Time.Before(oldest) {
			oldest = r.SettledAt.Time
		}
	}
	return max(0, oldest.Add(trimAge).Sub(now))
}

// updateConditions sets Ready and Funded from the account's spec and figures.
func (r *PointAccountReconciler) updateConditions(ctx context.Context, acct *videogenv1alpha1.PointAccount) error {
	before := acct.Status.DeepCopy()
	ready := metav1.Condition{Type: videogenv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: videogenv1alpha1.ReasonActive, Message: "The account accepts new tasks"}
	if err := ledger.Check(&acct.Status); err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, videogenv1alpha1.ReasonInvariantViolated, err.Error()
	} else if acct.Spec.Suspended {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, videogenv1alpha1.ReasonSuspended, "The account is suspended: it accepts no new tasks"
	}
	funded := metav1.Condition{Type: videogenv1alpha1.ConditionFunded, Status: metav1.ConditionTrue,
		// No figures in the message: it would change with every freeze and make each one a
		// conditions write racing the ledger (status.balance already says how many).
		Reason: videogenv1alpha1.ReasonHasBalance, Message: "Points are available for new tasks"}
	if acct.Status.Balance+acct.Status.Reserved <= 0 {
		funded.Status, funded.Reason, funded.Message = metav1.ConditionFalse, videogenv1alpha1.ReasonDepleted,
			"No points available; ask an administrator for a top-up"
	}
	for _, c := range []metav1.Condition{ready, funded} {
		c.ObservedGeneration = acct.Generation
		meta.SetStatusCondition(&acct.Status.Conditions, c)
	}
	acct.Status.ObservedGeneration = acct.Generation
	if equality.Semantic.DeepEqual(before, &acct.Status) {
		return nil
	}
	if ready.Reason == videogenv1alpha1.ReasonInvariantViolated && meta.IsStatusConditionTrue(before.Conditions, videogenv1alpha1.ConditionReady) {
		r.Recorder.Eventf(acct, nil, corev1.EventTypeWarning, ready.Reason, "Check", "%s", ready.Message)
	}
	// An update (not a patch) so a stale copy conflicts instead of overwriting the ledger's figures.
	return r.Status().Update(ctx, acct)
}

// orphanHolds returns what to do with holds whose task has been missing from the cache for the
// grace period (or was seen deleted), and when to look again. The scan reads every held task
// from the cache, so it runs at most every HoldGracePeriod/4 per account, unless a task was
// deleted. Tasks whose settle this manager is applying are left alone.
func (r *PointAccountReconciler) orphanHolds(ctx context.Context, acct *videogenv1alpha1.PointAccount, now time.Time) ([]orphanHold, time.Duration, error) {
	holds := acct.Status.HoldsByTask()
	scan := r.orphans.begin(acct.Namespace, now, r.HoldGracePeriod/4, len(holds) > 0)
	if !scan.due {
		return nil, scan.wait, nil
	}
	var out []orphanHold
	var next time.Duration
	for _, task := range slices.Sorted(maps.Keys(holds)) {
		settling := r.settling.has(acct.Namespace, task)
		cached := &videogenv1alpha1.VideoTask{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: acct.Namespace, Name: task}, cached); err == nil {
			// Still open (its webhook is due, say) but ended: a charge in its status and its
			// hold still here means the manager that ended it died before the settle landed.
			if o, ok := endedHold(cached); ok && !settling {
				out = append(out, o)
			}
			continue
		} else if !apierrors.IsNotFound(err) {
			return nil, 0, err
		}
		if settling {
			continue
		}
		if wait := scan.missing(task).Add(r.HoldGracePeriod).Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		o, found, err := r.orphanFate(ctx, acct.Namespace, task)
		if err != nil {
			return nil, 0, err
		}
		if found {
			out = append(out, o)
		}
	}
	scan.end()
	if len(holds) > len(out) && (next == 0 || r.HoldGracePeriod < next) {
		next = r.HoldGracePeriod // keep watching holds whose task may still be deleted
	}
	return out, next, nil
}

// orphanHold is what is done with a hold whose task the cache lacks, and why.
type orphanHold struct {
	op  ledger.Op
	why orphanReason
}

type orphanReason int

const (
	taskMissing      orphanReason = iota // refunded: the task does not exist
	taskEnded                            // settled as the ended task's status says
	taskNeverCharged                     // released: the task ended saying nothing was charged
)

func (o orphanHold) record(rec events.EventRecorder, acct *videogenv1alpha1.PointAccount, amount int64) {
	switch o.why {
	case taskEnded:
		rec.Eventf(acct, nil, corev1.EventTypeNormal, "HoldSettled", "Settle",
			"Settled %d points held for task %q as its status says (%s): the settle had not reached the account", amount, o.op.Task(), o.op.Outcome())
	case taskNeverCharged:
		rec.Eventf(acct, nil, corev1.EventTypeNormal, "HoldReleased", "Release",
			"Released %d points held for task %q, which ended without a charge", amount, o.op.Task())
	default:
		rec.Eventf(acct, nil, corev1.EventTypeNormal, "HoldReleased", "Refund",
			"Refunded %d points held for task %q, which does not exist", amount, o.op.Task())
	}
}

// orphanFate decides, on a fresh read, about a hold whose task the cache lacks. found is false
// when the task is still open (the cache lags): its hold stays.
func (r *PointAccountReconciler) orphanFate(ctx context.Context, namespace, name string) (o orphanHold, found bool, err error) {
	task := &videogenv1alpha1.VideoTask{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, task)
	switch {
	case apierrors.IsNotFound(err):
		return orphanHold{op: ledger.Settle(name, videogenv1alpha1.SettlementRefunded), why: taskMissing}, true, nil
	case err != nil:
		return orphanHold{}, false, err
	case !task.Status.Closed || settledCharge(task):
		// An open task keeps its hold unless it has ended (the cache lags); an ended one's
		// manager died before its settle landed.
		o, found = endedHold(task)
		return o, found, nil
	default:
		// Ended saying nothing was charged (refused, or its hold was found missing): a hold
		// made for it since is not its charge.
		return orphanHold{op: ledger.Release(name), why: taskNeverCharged}, true, nil
	}
}

// reservationRecheck is how soon an expired reservation is looked at again while tasks
// admitted under it still wait for their holds.
const reservationRecheck = 5 * time.Second

// expiredReservations returns releases for the reservations nobody renewed for the TTL, and
// when to look again. A reservation some of whose tasks are still waiting to take their points
// from it is kept until the VideoTask controller has moved them.
func (r *PointAccountReconciler) expiredReservations(ctx context.Context, acct *videogenv1alpha1.PointAccount, now time.Time) ([]ledger.Op, time.Duration, error) {
	ttl := r.ReservationTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	expired, next := r.reservations.expired(acct.Namespace, acct.Status.Reservations, now, ttl)
	if len(expired) == 0 {
		return nil, next, nil
	}
	holds := acct.Status.HoldsByTask()
	var ops []ledger.Op
	for _, name := range expired {
		tasks := &videogenv1alpha1.VideoTaskList{}
		if err := r.List(ctx, tasks, client.InNamespace(acct.Namespace), client.MatchingLabels{videogenv1alpha1.LabelReservation: name}); err != nil {
			return nil, 0, err
		}
		if anyWaitingForHold(tasks.Items, holds) {
			if next == 0 || reservationRecheck < next {
				next = reservationRecheck
			}
			continue
		}
		ops = append(ops, ledger.ReleaseReservation(name))
	}
	return ops, next, nil
}

// anyWaitingForHold reports whether a task is still to take its points (from its reservation):
// not finished, never charged, and holding nothing.
func anyWaitingForHold(tasks []videogenv1alpha1.VideoTask, holds map[string]int64) bool {
	return slices.ContainsFunc(tasks, func(t videogenv1alpha1.VideoTask) bool {
		_, held := holds[t.Name]
		return !held && t.Status.Charge == "" && !t.Status.Phase.Terminal()
	})
}

// acknowledgedSettlements returns ForgetSettlement for each settlement whose task shows it (or
// is gone, or was replaced by a newer task of the same name), unless a REST apiserver's late
// move could still come for it (lateMovePossible).
func (r *PointAccountReconciler) acknowledgedSettlements(ctx context.Context, acct *videogenv1alpha1.PointAccount) ([]ledger.Op, error) {
	var ops []ledger.Op
	now := r.Clock.Now()
	for _, s := range acct.Status.Settlements {
		task := &videogenv1alpha1.VideoTask{}
		key := client.ObjectKey{Namespace: acct.Namespace, Name: s.Task}
		if err := r.Get(ctx, key, task); err == nil && settledCharge(task) {
			if !lateMovePossible(task, now) {
				ops = append(ops, ledger.ForgetSettlement(s.Task))
			}
			continue
		} else if err == nil && task.Status.Charge == videogenv1alpha1.ChargeFrozen {
			continue // its settle write is on the way
		}
		// Unusual: decide on a fresh read, since forgetting too early could let a stale
		// reconcile freeze the task again.
		err := r.APIReader.Get(ctx, key, task)
		switch {
		case apierrors.IsNotFound(err):
			ops = append(ops, ledger.ForgetSettlement(s.Task))
		case err != nil:
			return nil, err
		case task.CreationTimestamp.After(s.SettledAt.Time),
			settledCharge(task) && !lateMovePossible(task, now):
			ops = append(ops, ledger.ForgetSettlement(s.Task))
		}
	}
	return ops, nil
}

// acknowledgedTopUps returns ForgetTopUp for each top-up record whose PointTopUp shows it applied.
func (r *PointAccountReconciler) acknowledgedTopUps(ctx context.Context, acct *videogenv1alpha1.PointAccount) ([]ledger.Op, error) {
	var ops []ledger.Op
	for _, rec := range acct.Status.TopUps {
		key := client.ObjectKey{Namespace: acct.Namespace, Name: rec.Name}
		t := &videogenv1alpha1.PointTopUp{}
		if err := r.Get(ctx, key, t); err == nil && string(t.UID) == rec.UID && t.Status.AppliedAt != nil {
			ops = append(ops, ledger.ForgetTopUp(rec.UID))
			continue
		}
		err := r.APIReader.Get(ctx, key, t)
		switch {
		case apierrors.IsNotFound(err):
			ops = append(ops, ledger.ForgetTopUp(rec.UID))
		case err != nil:
			return nil, err
		case string(t.UID) != rec.UID || t.Status.AppliedAt != nil:
			ops = append(ops, ledger.ForgetTopUp(rec.UID))
		}
	}
	return ops, nil
}

// holdCached reports whether the cached account of namespace holds points for task (true
// when the account cannot be read: the pass will tell).
func (r *PointAccountReconciler) holdCached(ctx context.Context, namespace, task string) bool {
	acct := ledger.CachedAccount(ctx, r.Client, namespace)
	return acct == nil || acct.Status.HasHold(task)
}

// endedHold is the settle of a task whose status says where its points went, if it says so.
func endedHold(t *videogenv1alpha1.VideoTask) (orphanHold, bool) {
	if !settledCharge(t) {
		return orphanHold{}, false
	}
	return orphanHold{op: ledger.Settle(t.Name, settlementOf(t.Status.Charge)), why: taskEnded}, true
}

func settledCharge(t *videogenv1alpha1.VideoTask) bool {
	return t.Status.Charge == videogenv1alpha1.ChargeDeducted || t.Status.Charge == videogenv1alpha1.ChargeRefunded
}

// SetupWithManager registers the controller. Tasks wake their account when their charge changes
// or they are deleted; top-ups when they are applied or deleted.
func (r *PointAccountReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	toAccount := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: videogenv1alpha1.PointAccountName}}}
	})
	// Tasks wake their account when their charge changes, and when they are deleted: a deleted
	// task's hold is refunded without waiting for the grace period.
	taskEvents := handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, n := e.ObjectOld.(*videogenv1alpha1.VideoTask), e.ObjectNew.(*videogenv1alpha1.VideoTask)
			if o.Status.Charge != n.Status.Charge {
				toAccount.Update(ctx, e, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A task that closes leaves the cache as if deleted, showing its state before its
			// last write; its settle is on its way (settling) or done. Only a task still
			// holding points makes the next pass look at once (and that pass confirms with a
			// fresh read).
			if t, ok := e.Object.(*videogenv1alpha1.VideoTask); ok && t.Status.Charge != videogenv1alpha1.ChargeDeducted &&
				t.Status.Charge != videogenv1alpha1.ChargeRefunded && !r.settling.has(t.Namespace, t.Name) &&
				r.holdCached(ctx, t.Namespace, t.Name) {
				r.orphans.deleted(t.Namespace, t.Name)
			}
			toAccount.Delete(ctx, e, q)
		},
	}
	applied := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*videogenv1alpha1.PointTopUp), e.ObjectNew.(*videogenv1alpha1.PointTopUp)
			return (o.Status.AppliedAt == nil) != (n.Status.AppliedAt == nil)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.PointAccount{}).
		Watches(&videogenv1alpha1.VideoTask{}, taskEvents).
		Watches(&videogenv1alpha1.PointTopUp{}, toAccount, builder.WithPredicates(applied)).
		// Accounts are independent; one slow account must not hold up the others' sweeps.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("pointaccount").
		Complete(r)
}
