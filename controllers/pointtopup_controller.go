package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// PointTopUpReconciler has the ledger credit (or debit) each PointTopUp exactly once, and
// records the outcome in its status.
type PointTopUpReconciler struct {
	client.Client
	Ledger   *ledger.Ledger
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// APIReader reads a deleted top-up's namespace and account around the cache (nil: Client).
	APIReader client.Reader
}

// A top-up carries FinalizerLedger from before the ledger queues its credit (ApplyTopUp queues
// nothing for one without it) for as long as the ledger holds a credit of it: deleted then, it
// stays Terminating, so the top-up lists a new manager builds its books from still name its
// reference. It comes off a deleted top-up the ledger holds nothing of (refused, or never
// queued), and off any deleted one once its namespace is being deleted and its account is gone
// or closing (namespace deletion is never held for good by a top-up).

// +kubebuilder:rbac:groups=videogen.dev,resources=pointtopups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointtopups/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=videogen.dev,resources=pointtopups/status,verbs=get;update;patch

// Reconcile applies the top-up if it was not applied or refused yet.
func (r *PointTopUpReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// After a conflict the write is repeated: an applied top-up stays in the journal until its
	// status says so.
	res, err := r.reconcile(ctx, req)
	return requeueOnConflict(ctx, "top-up status", res, err)
}

func (r *PointTopUpReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	topUp := &videogenv1alpha1.PointTopUp{}
	if err := r.Get(ctx, req.NamespacedName, topUp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !topUp.DeletionTimestamp.IsZero()
	guarded := controllerutil.ContainsFinalizer(topUp, videogenv1alpha1.FinalizerLedger)
	if deleting && guarded {
		if going, err := r.namespaceGoing(ctx, topUp.Namespace); err != nil || going {
			if err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, r.release(ctx, topUp)
		}
	}
	if topUp.Status.AppliedAt != nil {
		// Applied: its finalizer stays, deleted or not (it is the record of its reference).
		r.Ledger.ObserveTopUp(topUp) // a crash may have come between its status and the journal's trim
		return ctrl.Result{}, nil
	}
	// A refused one is asked about too: a refusal written by hand over a credit the books hold
	// is answered Applied, and written over.
	if deleting && !guarded && !topUp.RefusedForGood() {
		return ctrl.Result{}, nil
	}
	if !deleting && !guarded && !topUp.RefusedForGood() {
		if err := r.guard(ctx, topUp); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := topUp.Status.DeepCopy()
	out, err := r.Ledger.ApplyTopUp(topUp)
	switch {
	case errors.Is(err, ledger.ErrNotReady):
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case (errors.Is(err, ledger.ErrAccountNotFound) || errors.Is(err, ledger.ErrAccountClosing)) && deleting:
		return ctrl.Result{}, r.release(ctx, topUp) // no account, or a credit kept from a closing one: nothing was queued
	case errors.Is(err, ledger.ErrAccountClosing):
		r.setApplied(topUp, metav1.ConditionFalse, videogenv1alpha1.ReasonAccountClosing,
			fmt.Sprintf("the PointAccount of namespace %q is being closed (deleted: it takes no tasks, and goes once it is empty); a credit would only keep it from closing, so the top-up is applied to the account created after it", topUp.Namespace))
		if !equality.Semantic.DeepEqual(before, &topUp.Status) {
			if err := r.Status().Update(ctx, topUp); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(topUp, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonAccountClosing, "Credit", "The account is being closed; the credit waits for the account created after it")
		}
		// The account's deletion and its successor's creation wake it; this is a safety net
		// for a wake that reaches the controller before the ledger's books see the change.
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	case errors.Is(err, ledger.ErrAccountNotFound):
		r.setApplied(topUp, metav1.ConditionFalse, videogenv1alpha1.ReasonAccountNotFound,
			fmt.Sprintf("namespace %q has no PointAccount named %q yet; the top-up is applied when it exists", topUp.Namespace, videogenv1alpha1.PointAccountName))
		if !equality.Semantic.DeepEqual(before, &topUp.Status) {
			if err := r.Status().Update(ctx, topUp); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(topUp, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonAccountNotFound, "Credit", "No PointAccount in this namespace yet")
		}
		return ctrl.Result{}, nil // the account's creation wakes it
	case err != nil:
		return ctrl.Result{}, err
	case out.NeedsFinalizer:
		// Its finalizer was taken off since our copy (by hand), or a refused one is asked to
		// be applied after all: put it back; the patch's event asks again.
		if deleting {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.guard(ctx, topUp)
	case out.Queued:
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil // the ledger wakes it when applied or refused
	case out.Gone && deleting:
		return ctrl.Result{}, r.release(ctx, topUp) // deleted before anything was queued
	case out.AlreadyApplied, out.Gone:
		return ctrl.Result{}, nil // the cache has not caught up with its status, or its deletion, yet
	case out.Refused:
		// Not when its status shows a refusal for good already: one written by hand may give
		// another reason (both say nothing moved), and the CRD keeps a refusal's reason, so
		// writing the ledger's over it would fail at every retry, for good.
		if !topUp.RefusedForGood() {
			// The account that refused it: one re-created later does not list it as its own.
			topUp.Status.AccountUID = types.UID(out.AccountUID)
			r.setApplied(topUp, metav1.ConditionFalse, out.Reason, out.Message)
			if !equality.Semantic.DeepEqual(before, &topUp.Status) {
				if err := r.Status().Update(ctx, topUp); err != nil {
					return ctrl.Result{}, err
				}
				r.Recorder.Eventf(topUp, nil, corev1.EventTypeWarning, out.Reason, "Credit", "%s", out.Message)
			}
		}
		r.Ledger.ObserveTopUp(topUp) // the refusal's journal entry may go
		if deleting {
			return ctrl.Result{}, r.release(ctx, topUp) // refused for good: nothing credited
		}
		return ctrl.Result{}, nil
	}

	now := metav1.NewTime(r.Clock.Now())
	topUp.Status.AppliedAt = &now
	topUp.Status.BalanceAfter = &out.BalanceAfter
	topUp.Status.AccountUID = types.UID(out.AccountUID)
	reason, verb, amount := videogenv1alpha1.ReasonCredited, "Credited", topUp.Spec.Amount
	if amount < 0 {
		reason, verb, amount = videogenv1alpha1.ReasonDebited, "Debited", -amount
	}
	msg := fmt.Sprintf("%s %d points (reference %s)", verb, amount, topUp.Spec.Reference)
	r.setApplied(topUp, metav1.ConditionTrue, reason, msg)
	// The journal keeps the top-up until this status shows it, so this write can be retried.
	if err := r.Status().Update(ctx, topUp); err != nil {
		return ctrl.Result{}, err
	}
	r.Ledger.ObserveTopUp(topUp)
	r.Recorder.Eventf(topUp, nil, corev1.EventTypeNormal, reason, "Credit", "%s; balance is now %d", msg, out.BalanceAfter)
	return ctrl.Result{}, nil
}

// guard puts FinalizerLedger on a top-up before the ledger is asked to queue its credit.
func (r *PointTopUpReconciler) guard(ctx context.Context, t *videogenv1alpha1.PointTopUp) error {
	orig := t.DeepCopy()
	controllerutil.AddFinalizer(t, videogenv1alpha1.FinalizerLedger)
	return r.Patch(ctx, t, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// release takes FinalizerLedger off a deleted top-up the ledger holds no credit of.
func (r *PointTopUpReconciler) release(ctx context.Context, t *videogenv1alpha1.PointTopUp) error {
	if !controllerutil.ContainsFinalizer(t, videogenv1alpha1.FinalizerLedger) {
		return nil
	}
	orig := t.DeepCopy()
	controllerutil.RemoveFinalizer(t, videogenv1alpha1.FinalizerLedger)
	return client.IgnoreNotFound(r.Patch(ctx, t, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// namespaceGoing reports whether namespace is being deleted and its account is gone or closing:
// its top-ups then go whatever the ledger holds (the namespace controller deletes them, and a
// namespace made again with the name starts with no reference used).
func (r *PointTopUpReconciler) namespaceGoing(ctx context.Context, namespace string) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	ns := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp.IsZero() {
		return false, nil
	}
	acct := &videogenv1alpha1.PointAccount{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: videogenv1alpha1.PointAccountName}, acct)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && !acct.DeletionTimestamp.IsZero(), client.IgnoreNotFound(err)
}

func (r *PointTopUpReconciler) setApplied(t *videogenv1alpha1.PointTopUp, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: videogenv1alpha1.ConditionApplied, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation,
	})
	t.Status.ObservedGeneration = t.Generation
}

// SetupWithManager registers the controller; a new PointAccount wakes the top-ups waiting for
// it, and the ledger wakes a top-up it has applied.
func (r *PointTopUpReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.PointTopUp{}).
		Watches(&videogenv1alpha1.PointAccount{}, handler.EnqueueRequestsFromMapFunc(r.pendingTopUps)).
		WatchesRawSource(source.Channel(r.Ledger.TopUpEvents(), &handler.EnqueueRequestForObject{})).
		Named("pointtopup").
		Complete(r)
}

func (r *PointTopUpReconciler) pendingTopUps(ctx context.Context, obj client.Object) []reconcile.Request {
	var list videogenv1alpha1.PointTopUpList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, t := range list.Items {
		waiting := t.Status.AppliedAt == nil && !t.RefusedForGood()
		// A deleted one the finalizer keeps: its account closing may let it go (namespaceGoing).
		kept := !t.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(&t, videogenv1alpha1.FinalizerLedger)
		if waiting || kept {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return reqs
}
