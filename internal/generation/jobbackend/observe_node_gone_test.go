package jobbackend

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Checked, holds: a Job's pod on a node scaled away. Interleaving: the
// render's pod succeeds and the Job controller writes the Job Complete; before the manager
// reads the pod's termination message (it is down, or behind), the node goes (a spot GPU node
// reclaimed, the autoscaler removing an emptied node) and the pod garbage collector deletes the
// pod with it. The termination message was the result's only copy. The stage waits out
// cacheGrace after the Job's completion (a pod missing from the cache right after it finished
// is cache lag), then fails: the task ends Failed and is refunded, never Running for good and
// never charged without a result. The user sees "Job … completed but its result is unusable:
// none of its pods is left …". (Losing the render is the same loss as the TTL's, documented in
// docs/job-backend.md; a manager that is up reads the pod within its poll interval, well before
// the pod garbage collector's 40 s quarantine of pods on a deleted node.)
func TestACompletedJobWhosePodWentWithItsNodeFailsAfterTheGrace(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakePassiveClock(now)
	cfg.Clock = clock
	w := testWork(videogenv1alpha1.StageRender)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithStatusSubresource(&batchv1.Job{}).Build()
	b, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := parseHandle(h)
	var job batchv1.Job
	if err := c.Get(context.Background(), key, &job); err != nil {
		t.Fatal(err)
	}
	done := metav1.NewTime(now)
	job.Status.CompletionTime = &done
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(context.Background(), &job); err != nil {
		t.Fatal(err)
	}
	// No pod of the Job is left: it went with its node.
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(key.Namespace)); err != nil || len(pods.Items) != 0 {
		t.Fatalf("pods: %v, %v", pods.Items, err)
	}

	obs, err := b.Observe(context.Background(), w, h)
	if err != nil || obs.State != generation.Running {
		t.Fatalf("within the cache grace: Observe = %+v, %v; want Running", obs, err)
	}
	clock.SetTime(now.Add(cacheGrace + time.Second))
	obs, err = b.Observe(context.Background(), w, h)
	if err != nil || obs.State != generation.Failed || !strings.Contains(obs.Message, "none of its pods is left") {
		t.Fatalf("past the cache grace: Observe = %+v, %v; want Failed, none of its pods is left", obs, err)
	}
}
