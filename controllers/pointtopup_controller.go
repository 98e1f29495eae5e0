package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// PointTopUpReconciler credits each PointTopUp to its namespace's account exactly once.
type PointTopUpReconciler struct {
	client.Client
	// APIReader reads around the cache: a top-up is credited only after a fresh read says it
	// was not yet applied.
	APIReader client.Reader
	Ledger    *ledger.Ledger
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
}

// +kubebuilder:rbac:groups=videogen.dev,resources=pointtopups,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointtopups/status,verbs=get;update;patch

// Reconcile credits the top-up if it was not credited yet.
func (r *PointTopUpReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &videogenv1alpha1.PointTopUp{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cached.Status.AppliedAt != nil || !cached.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// The cache can lag our own status write, and the ledger forgets its record of a top-up
	// once the status shows it: so decide on a fresh read, never on the cache.
	topUp := &videogenv1alpha1.PointTopUp{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, topUp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if topUp.Status.AppliedAt != nil {
		return ctrl.Result{}, nil
	}
	before := topUp.Status.DeepCopy()
	res, err := r.Ledger.Do(ctx, topUp.Namespace, ledger.TopUp(topUp.Name, string(topUp.UID), topUp.Spec.Amount))
	switch {
	case errors.Is(err, ledger.ErrAccountNotFound):
		r.setApplied(topUp, metav1.ConditionFalse, videogenv1alpha1.ReasonAccountNotFound,
			fmt.Sprintf("namespace %q has no PointAccount named %q yet; the top-up is applied when it exists", topUp.Namespace, videogenv1alpha1.PointAccountName))
		if !equality.Semantic.DeepEqual(before, &topUp.Status) {
			if err := r.Status().Update(ctx, topUp); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(topUp, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonAccountNotFound, "Credit", "No PointAccount in this namespace yet")
		}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case err != nil:
		return ctrl.Result{}, err
	}

	now := metav1.NewTime(r.Clock.Now())
	topUp.Status.AppliedAt = &now
	topUp.Status.BalanceAfter = &res.BalanceAfter
	r.setApplied(topUp, metav1.ConditionTrue, videogenv1alpha1.ReasonCredited,
		fmt.Sprintf("Credited %d points (reference %s)", topUp.Spec.Amount, topUp.Spec.Reference))
	// A failed write here is safe to retry: the ledger's record makes the credit a no-op.
	if err := r.Status().Update(ctx, topUp); err != nil {
		return ctrl.Result{}, err
	}
	if res.Changed {
		r.Recorder.Eventf(topUp, nil, corev1.EventTypeNormal, videogenv1alpha1.ReasonCredited, "Credit",
			"Credited %d points (reference %s); balance is now %d", topUp.Spec.Amount, topUp.Spec.Reference, res.BalanceAfter)
	}
	return ctrl.Result{}, nil
}

func (r *PointTopUpReconciler) setApplied(t *videogenv1alpha1.PointTopUp, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: videogenv1alpha1.ConditionApplied, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation,
	})
	t.Status.ObservedGeneration = t.Generation
}

// SetupWithManager registers the controller; a new PointAccount wakes the top-ups waiting for it.
func (r *PointTopUpReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.PointTopUp{}).
		Watches(&videogenv1alpha1.PointAccount{}, handler.EnqueueRequestsFromMapFunc(r.pendingTopUps)).
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
		if t.Status.AppliedAt == nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
		}
	}
	return reqs
}
