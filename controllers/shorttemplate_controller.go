package controllers

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// ShortTemplateReconciler gives every ShortTemplate its public ushort_ id.
type ShortTemplateReconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates/status,verbs=get;update;patch

// Reconcile assigns the id label if missing and mirrors it into status.
func (r *ShortTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	st := &videogenv1alpha1.ShortTemplate{}
	if err := r.Get(ctx, req.NamespacedName, st); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	id, ok := st.Labels[videogenv1alpha1.LabelShortTemplateID]
	if !ok {
		// Objects made with kubectl get an id derived from their UID: unique and stable.
		if st.Labels == nil {
			st.Labels = map[string]string{}
		}
		id = ShortTemplateID(st.UID)
		st.Labels[videogenv1alpha1.LabelShortTemplateID] = id
		if err := r.Update(ctx, st); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := st.Status.DeepCopy()
	cond := metav1.Condition{Type: videogenv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "IDAssigned",
		Message: "usable as template_id " + id, ObservedGeneration: st.Generation}
	if !strings.HasPrefix(id, videogenv1alpha1.ShortTemplateIDPrefix) {
		cond.Status, cond.Reason = metav1.ConditionFalse, "InvalidID"
		cond.Message = "label " + videogenv1alpha1.LabelShortTemplateID + " must start with " + videogenv1alpha1.ShortTemplateIDPrefix
		id = ""
	}
	st.Status.ID = id
	st.Status.ObservedGeneration = st.Generation
	meta.SetStatusCondition(&st.Status.Conditions, cond)
	if equality.Semantic.DeepEqual(before, &st.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Status().Update(ctx, st)
}

// ShortTemplateID derives a public id from an object's UID.
func ShortTemplateID(uid types.UID) string {
	return videogenv1alpha1.ShortTemplateIDPrefix + strings.ReplaceAll(string(uid), "-", "")[:24]
}

// SetupWithManager registers the controller.
func (r *ShortTemplateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.ShortTemplate{}).
		Named("shorttemplate").
		Complete(r)
}
