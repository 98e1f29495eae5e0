package catalog_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// While two templates carry one id, the lookup picks the one the
// ShortTemplate controller keeps. Interleaving: an account (kubectl apply, GitOps) creates
// ShortTemplate zz-older with label ushort_promo and, a minute later, aa-newer with the same
// label (a copied manifest); neither was reconciled yet (the manager is restarting, or its
// queue is behind), so neither holds the id in status. The controller keeps the id on the
// older one (idTaken/olderThan) and relabels the newcomer. Before the fix FindShortTemplate
// took the first of the list, ordered by name, so a task created with template_id
// ushort_promo in that window rendered the newcomer's media: not the template the id goes
// on naming, and not what GET /v1/short_templates/ushort_promo shows a moment later.
func TestDuplicateIDResolvesToTheTemplateThatKeepsIt(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	older := &videogenv1alpha1.ShortTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "zz-older", UID: "uid-older", CreationTimestamp: t0,
			Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_promo"}},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Promo", TargetURL: "https://cdn.example.com/promo.mp4"},
	}
	newer := &videogenv1alpha1.ShortTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "aa-newer", UID: "uid-newer", CreationTimestamp: t1,
			Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_promo"}},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Copy", TargetURL: "https://cdn.example.com/copy.mp4"},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(newer, older).Build()
	got, err := catalog.Resolve(context.Background(), c, "acme", videogenv1alpha1.CapabilityShort, "ushort_promo")
	if err != nil || got.MediaURL != older.Spec.TargetURL {
		t.Errorf("Resolve(ushort_promo) = %+v, %v; want the older template's media %s (the controller keeps the id on it)", got, err, older.Spec.TargetURL)
	}
}
