package controllers

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
)

// ShortTemplateReconciler gives every ShortTemplate its public ushort_ id and keeps it: the id
// is what callers put in template_id, so it must stay the same for the template's life and
// name one template only.
type ShortTemplateReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=videogen.dev,resources=shorttemplates/status,verbs=get;update;patch

// Reconcile assigns the id label if missing, restores it if it was changed after assignment,
// refuses an id that another template of the account already has, and mirrors it into status.
func (r *ShortTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	st := &videogenv1alpha1.ShortTemplate{}
	if err := r.Get(ctx, req.NamespacedName, st); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A template deleted since the cache saw it is gone for good: nothing to assign or mirror.
	id, err := r.keepID(ctx, st)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
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
	return ctrl.Result{}, client.IgnoreNotFound(r.Status().Update(ctx, st))
}

// keepID returns the template's id after making its label say it: the id in status once one
// was assigned (a label edited or removed later is put back), else the label the creator chose
// unless another template of the account has it, else one derived from the UID.
func (r *ShortTemplateReconciler) keepID(ctx context.Context, st *videogenv1alpha1.ShortTemplate) (string, error) {
	label, labelled := st.Labels[videogenv1alpha1.LabelShortTemplateID]
	want, why := label, ""
	switch {
	case st.Status.ID != "":
		if label != st.Status.ID {
			want, why = st.Status.ID, "the id of a template is stable for its life; label "+videogenv1alpha1.LabelShortTemplateID+" was put back to "+st.Status.ID
		}
	case !labelled:
		// Objects made with kubectl get an id derived from their UID: unique and stable.
		want = ShortTemplateID(st.UID)
	default:
		taken, err := r.idTaken(ctx, st, label)
		if err != nil {
			return "", err
		}
		if taken {
			want = ShortTemplateID(st.UID)
			why = "id " + label + " belongs to another template of this account; this one is " + want
		}
	}
	if labelled && want == label {
		return label, nil
	}
	if st.Labels == nil {
		st.Labels = map[string]string{}
	}
	st.Labels[videogenv1alpha1.LabelShortTemplateID] = want
	if err := r.Update(ctx, st); err != nil {
		return "", err
	}
	if why != "" && r.Recorder != nil {
		r.Recorder.Eventf(st, nil, corev1.EventTypeWarning, "IDKept", "Relabel", "%s", why)
	}
	return want, nil
}

// idTaken says whether another template of st's account already goes by id: one that holds it
// in status, or an older one that has the label (they may both be new).
func (r *ShortTemplateReconciler) idTaken(ctx context.Context, st *videogenv1alpha1.ShortTemplate, id string) (bool, error) {
	var list videogenv1alpha1.ShortTemplateList
	if err := r.List(ctx, &list, client.InNamespace(st.Namespace), client.MatchingLabels{videogenv1alpha1.LabelShortTemplateID: id}); err != nil {
		return false, err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == st.UID || !other.DeletionTimestamp.IsZero() {
			continue
		}
		// The older keeps the id: the rule the catalog's lookup follows too, so that a task takes
		// the template that keeps it.
		if other.Status.ID == id || catalog.OlderShortTemplate(other, st) {
			return true, nil
		}
	}
	return false, nil
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
