package controllers

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// A template made before mediaURL was required of its capability passes the kube-apiserver's
// ratcheting validation on every later update (so an envtest cannot make one: a fake client
// stands in for the store). It is not Ready: every task on it would fail at the backend.
func TestATemplateWithoutItsMediaIsNotReady(t *testing.T) {
	for _, tc := range []struct {
		capability videogenv1alpha1.Capability
		media      string
		reason     string
	}{
		{videogenv1alpha1.CapabilityShort, "", videogenv1alpha1.ReasonNoMedia},
		{videogenv1alpha1.CapabilityPose, "", videogenv1alpha1.ReasonNoMedia},
		{videogenv1alpha1.CapabilityShort, "https://media.example/t.mp4", ReasonServed},
		{videogenv1alpha1.CapabilityEraser, "", ReasonServed}, // works on the caller's video
	} {
		t.Run(string(tc.capability)+" "+tc.media, func(t *testing.T) {
			tmpl := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "t"},
				Spec: videogenv1alpha1.TemplateSpec{Capability: tc.capability, DisplayName: "T", MediaURL: tc.media}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl).WithStatusSubresource(tmpl).Build()
			backend := generation.Named{Name: "test-backend", Backend: testbackend.New()}
			r := &TemplateReconciler{Client: c, DefaultPrice: 10, Backends: generation.Routes{
				videogenv1alpha1.CapabilityShort: backend, videogenv1alpha1.CapabilityPose: backend, videogenv1alpha1.CapabilityEraser: backend}}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "t"}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Name: "t"}, tmpl); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(tmpl.Status.Conditions, videogenv1alpha1.ConditionReady)
			if ready == nil || ready.Reason != tc.reason || (ready.Status == metav1.ConditionTrue) != (tc.reason == ReasonServed) {
				t.Fatalf("Ready: %+v, want reason %s", ready, tc.reason)
			}
		})
	}
}
