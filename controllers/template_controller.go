package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
)

// ReasonServed: a generation backend serves the template's capability.
const ReasonServed = "Served"

// TemplateReconciler tells whether a catalog template can be used: its schema is checked by
// the kube-apiserver, so what is left is whether a generation backend serves its capability
// (--backends-config). A template nobody serves lists fine but its tasks wait and time out.
type TemplateReconciler struct {
	client.Client
	Backends     generation.Router
	DefaultPrice int64
}

// +kubebuilder:rbac:groups=videogen.dev,resources=templates,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=templates/status,verbs=get;update;patch

// Reconcile writes the Ready condition.
func (r *TemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &videogenv1alpha1.Template{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := t.Status.DeepCopy()
	cond := metav1.Condition{Type: videogenv1alpha1.ConditionReady, ObservedGeneration: t.Generation}
	if !catalog.Usable(t) {
		// The schema refuses this since mediaURL became required; a template made before
		// stays (validation ratchets), and every task on it would fail at the backend.
		cond.Status, cond.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonNoMedia
		cond.Message = fmt.Sprintf("no spec.mediaURL: a %s template needs its media, and its tasks fail without it; set mediaURL", t.Spec.Capability)
	} else if name, _, ok := r.Backends.Route(t.Spec.Capability); ok {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonServed
		cond.Message = fmt.Sprintf("%s serves %s; %s", name, t.Spec.Capability, priceSummary(t.Spec, r.DefaultPrice))
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonNoBackend
		cond.Message = fmt.Sprintf("no generation backend serves %s (see --backends-config): its tasks wait until they time out and are refunded", t.Spec.Capability)
	}
	meta.SetStatusCondition(&t.Status.Conditions, cond)
	t.Status.Price = pricing.Summary(catalog.TermsOf(&t.Spec), r.DefaultPrice)
	if equality.Semantic.DeepEqual(before, &t.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Update(ctx, t)
}

// priceSummary says what a task on the template costs, as pricing.Quote prices it.
func priceSummary(s videogenv1alpha1.TemplateSpec, defaultPrice int64) string {
	terms := catalog.TermsOf(&s)
	if terms.Adjustable {
		// As status.price says it: the durations in range that are priced, and the default
		// price only when some duration in range has no entry.
		return fmt.Sprintf("%d to %d s, points a task: %s", terms.MinDuration, terms.MaxDuration, pricing.Summary(terms, defaultPrice))
	}
	price, err := pricing.Quote(terms, nil, defaultPrice)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d points a task", price)
}

// SetupWithManager registers the controller, and exports which capabilities are served: the
// routes are fixed for the manager's lifetime, like the Ready conditions written from them.
func (r *TemplateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	recordServedCapabilities(r.Backends)
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.Template{}).
		Named("template").
		Complete(r)
}
