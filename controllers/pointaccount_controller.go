package controllers

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// PointAccountReconciler keeps an account's finalizer: an account goes only when the ledger has
// closed its books, and its API keys go with it. Its status (figures, journal, conditions) is
// the ledger's to write.
type PointAccountReconciler struct {
	client.Client
	// APIReader lists the keys to revoke around any cache: one issued a moment ago counts.
	APIReader client.Reader
	// KeyNamespace is where the API keys are (the operator's namespace).
	KeyNamespace string
	Ledger       *ledger.Ledger
	Recorder     events.EventRecorder
}

// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=pointaccounts/finalizers,verbs=update
// A closed account's API keys are revoked:
// +kubebuilder:rbac:groups="",namespace=videogen-system,resources=secrets,verbs=list;delete

// Reconcile publishes the account's figures and runs the phase its lifecycle is in, as Cluster
// API's reconcilers do: reconcileNormal for a live account, reconcileDelete for a deleted one.
func (r *PointAccountReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// A conflict: the ledger wrote the status since our copy was read.
	res, err := r.reconcile(ctx, req)
	return requeueOnConflict(ctx, "the account's finalizer", res, err)
}

func (r *PointAccountReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	acct := &videogenv1alpha1.PointAccount{}
	if err := r.Get(ctx, req.NamespacedName, acct); err != nil {
		if apierrors.IsNotFound(err) {
			// A closed account leaves the metrics too, or dashboards would list it for as long
			// as the manager runs.
			accountPoints.DeletePartialMatch(prometheus.Labels{"namespace": req.Namespace})
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for state, v := range map[string]int64{"balance": acct.Status.Balance, "frozen": acct.Status.Frozen,
		"spent": acct.Status.Spent, "credited": acct.Status.Credited} {
		accountPoints.WithLabelValues(acct.Namespace, state).Set(float64(v))
	}
	if !acct.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, acct)
	}
	return r.reconcileNormal(ctx, acct)
}

// reconcileNormal adds the ledger's finalizer to a new account and keeps its journal tidy.
func (r *PointAccountReconciler) reconcileNormal(ctx context.Context, acct *videogenv1alpha1.PointAccount) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(acct, videogenv1alpha1.FinalizerLedger) {
		return r.tidy(acct), nil
	}
	orig := acct.DeepCopy()
	controllerutil.AddFinalizer(acct, videogenv1alpha1.FinalizerLedger)
	return ctrl.Result{}, r.Patch(ctx, acct, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// reconcileDelete removes the finalizer from a deleted account once the ledger has closed its
// books (Ledger.Closable) and its API keys are revoked: a key left would still read the
// namespace's tasks and results, and spend the points of an account made later in it, for
// whoever that is. The signing Secret stays (its tasks' webhooks may still be retried): it
// goes with the namespace, or by hand.
func (r *PointAccountReconciler) reconcileDelete(ctx context.Context, acct *videogenv1alpha1.PointAccount) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(acct, videogenv1alpha1.FinalizerLedger) {
		return ctrl.Result{}, nil
	}
	r.tidy(acct)
	err := r.Ledger.Closable(acct.Namespace)
	switch {
	case errors.Is(err, ledger.ErrNotReady):
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		// The ledger writes what keeps the account into its Ready condition (reason Closing)
		// and requeues it with each write; this is the safety net.
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	// Before the finalizer goes: a crash between the two revokes again, and finds none left.
	revoked, err := apikeys.RevokeAll(ctx, r.Client, r.APIReader, r.KeyNamespace, acct.Namespace)
	if len(revoked) > 0 {
		// Said as they go: a pass that revokes them and then loses the finalizer's write to a
		// conflict leaves none for the next to name.
		r.Recorder.Eventf(acct, nil, corev1.EventTypeNormal, "APIKeysRevoked", "Close", "Revoked the API keys of the account as it closes: %s", strings.Join(revoked, ", "))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	orig := acct.DeepCopy()
	controllerutil.RemoveFinalizer(acct, videogenv1alpha1.FinalizerLedger)
	if err := r.Patch(ctx, acct, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(acct, nil, corev1.EventTypeNormal, "Closed", "Close", "The account is empty: its books are closed and its API keys revoked")
	return ctrl.Result{}, nil
}

// tidy asks the ledger to resolve the journal entries whose source left its books unseen, while
// there are any: an idle account's journal empties too.
func (r *PointAccountReconciler) tidy(acct *videogenv1alpha1.PointAccount) ctrl.Result {
	if len(acct.Status.Journal) == 0 {
		return ctrl.Result{}
	}
	r.Ledger.Tidy(acct.Namespace)
	return ctrl.Result{RequeueAfter: 10 * time.Second}
}

// accountWorkers is how many accounts are reconciled at once.
const accountWorkers = 8

// SetupWithManager registers the controller; the ledger wakes an account whose books changed.
func (r *PointAccountReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.PointAccount{}).
		WatchesRawSource(source.Channel(r.Ledger.AccountEvents(), &handler.EnqueueRequestForObject{})).
		Named("pointaccount").
		// Several at once: a manager's start may have to put the finalizer on every account, one
		// kube-apiserver round trip each, while the task workers keep it busy.
		WithOptions(controller.Options{MaxConcurrentReconciles: accountWorkers}).
		Complete(r)
}
