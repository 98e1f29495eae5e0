package controllers_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// A template deleted right after its creation is still in the cache when it is reconciled;
// the label or status write then finds it gone. That is the end of the work, not an error
// (controller-runtime would log it with a stack trace and retry).
func TestAShortTemplateDeletedWhileReconciledIsNotAnError(t *testing.T) {
	gone := func(obj client.Object) error {
		return apierrors.NewNotFound(schema.GroupResource{Group: "videogen.dev", Resource: "shorttemplates"}, obj.GetName())
	}
	for name, funcs := range map[string]interceptor.Funcs{
		"the id label write": {Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
			return gone(obj)
		}},
		"the status write": {SubResourceUpdate: func(_ context.Context, _ client.Client, _ string, obj client.Object, _ ...client.SubResourceUpdateOption) error {
			return gone(obj)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			st := &videogenv1alpha1.ShortTemplate{
				ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "ushort-1", UID: "0f9c3c1e-7a51-4a54-9e1b-1d3f2f0a9b77"},
				Spec:       videogenv1alpha1.ShortTemplateSpec{DisplayName: "Intro", TargetURL: "https://cdn.example.com/t.mp4"},
			}
			if name == "the status write" {
				st.Labels = map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_abc"}
			}
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(st).
				WithStatusSubresource(&videogenv1alpha1.ShortTemplate{}).Build(), funcs)
			r := &controllers.ShortTemplateReconciler{Client: c}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(st)})
			if err != nil || !res.IsZero() {
				t.Fatalf("Reconcile = %+v, %v; want nothing to do", res, err)
			}
		})
	}
}
