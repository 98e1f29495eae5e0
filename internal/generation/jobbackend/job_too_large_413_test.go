package jobbackend

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// A Job under maxJobBytes (see job_too_large_test.go) that the
// cluster still refuses as too large, 413 RequestEntityTooLarge (an apiserver run with a lower
// --max-request-bytes, or a proxy in front of it with a lower body limit). Before the fix the
// 413 was an ordinary error, retried as an outage until the task's timeout; the same Job is
// refused at every retry, so it is permanent, saying the Job is too large.
func TestAJobRefusedAsTooLargeFailsItsStage(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return apierrors.NewRequestEntityTooLargeError("limit is 524288")
		},
	}).Build()
	b, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Submit(context.Background(), testWork(videogenv1alpha1.StageRender))
	if !generation.IsPermanent(err) || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("Submit refused with 413 = %v; want a permanent error saying the Job is too large", err)
	}
}
