package jobbackend

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Analyze outputs over 128 KiB handed to a render Job. Every input goes
// to every container as one environment string (VIDEOGEN_PREVIOUS=<the outputs' JSON>), and
// with inputArgs also as one argument; Linux's execve refuses any single argument or
// environment string over MAX_ARG_STRLEN (32 pages, 131072 bytes) with E2BIG. Reachable: a Job
// backend's own analyze cannot write more than the kubelet's 4096-byte termination message, but
// the controller keeps outputs up to 256 KiB, which an HTTP backend may return; when the
// capability is routed to Jobs between the stages (a --backends-config change and a restart
// while the analyze ran, see the controllers package's test of a route change between stages), the render is a Job with them.
// What the user saw: the Job was created, its pod scheduled on a GPU node, and its container
// never started (StartError, "exec: argument list too long"); the Job retried it to its
// backoff limit and failed, and the task ended render_failed minutes later with a runtime error
// that says nothing of the cause (refunded). With a template of many containers the Job itself
// can pass etcd's limit (the outputs repeated in each container's env): the create is refused
// with 413, which is retried as an outage until the task's timeout.
// The fix: Submit refuses such work at once, as a permanent error that says which input is too
// large for a container's environment; the task fails and is refunded without creating a Job.
func TestRenderInputsTooLargeForExecAreRefusedAtSubmit(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	b, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageRender)
	w.Previous = map[string]string{"landmarks": strings.Repeat("1,", 70<<10)} // 140 KiB
	_, err = b.Submit(context.Background(), w)
	if !generation.IsPermanent(err) || !strings.Contains(err.Error(), "VIDEOGEN_PREVIOUS") {
		t.Fatalf("Submit with %d bytes of analyze outputs = %v; want a permanent error naming VIDEOGEN_PREVIOUS", len(w.Previous["landmarks"]), err)
	}
	var jobs batchv1.JobList
	if err := c.List(context.Background(), &jobs); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("Jobs created: %d, %v", len(jobs.Items), err)
	}

	// Outputs that fit are handed over as before.
	w.Previous = map[string]string{"landmarks": strings.Repeat("1,", 60<<10)} // 120 KiB
	if _, err := b.Submit(context.Background(), w); err != nil {
		t.Fatalf("Submit with %d bytes of analyze outputs = %v", len(w.Previous["landmarks"]), err)
	}
}
