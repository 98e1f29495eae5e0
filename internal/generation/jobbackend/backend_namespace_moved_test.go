package jobbackend

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// The Job backend's configured namespace changes across a manager
// restart while a stage runs. handle's comment said a namespace/name handle "keeps finding the
// Job if the configured namespace changes", and workHandle accepts the Job in the task's own
// namespace besides the configured one, so a move from "" to a namespace of its own holds
// (TestTheWorksOwnHandlesAreStillUsed; it did not behind the manager's cache:
// cache_namespace_moved_test.go, which reports that move lost too). The other moves did not: from a namespace of its own
// back to "" (the layout docs/job-backend.md calls recommended), or to another namespace.
// Interleaving: 1. jobs.yaml says namespace: videogen-jobs; a task's render runs as the Job
// videogen-jobs/vt-…-render, that handle in its status. 2. The platform team sets namespace: ""
// and restarts the manager (the file is read at start). 3. The new manager observes the handle:
// workHandle refuses it (neither the configured namespace nor the task's) as a plain permanent
// error. What the user sees: every task running as a Job at the restart fails, "the backend
// lost the render stage", and is refunded; a render that had finished is thrown away; and its
// Job runs on in videogen-jobs to its own deadline, as nothing deletes it. (Moved to another
// namespace instead, the refusal is the same.)
// The fix: a handle that carries the work's own Job name in a namespace this backend no longer
// uses is reported lost (generation.Lost, still a permanent error that reads nothing there, as
// backend_handle_test.go requires): the controller submits the stage again, in the namespace configured now,
// and the task runs to its end instead of failing.
func TestAStageWhoseJobNamespaceWasMovedIsSubmittedAgainNotFailed(t *testing.T) {
	for _, move := range []struct{ from, to string }{
		{"videogen-jobs", ""},
		{"videogen-jobs", "gpu-jobs"},
	} {
		t.Run(move.from+" to "+move.to, func(t *testing.T) {
			w := testWork(videogenv1alpha1.StageRender)
			before, after, _ := backendsAcrossAMove(t, move.from, move.to)
			h, err := before.Submit(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}

			_, err = after.Observe(context.Background(), w, h)
			if !generation.IsLost(err) {
				t.Fatalf("after the namespace moved from %q to %q, Observe(%q) = %v; want the stage reported lost, to be submitted again", move.from, move.to, h, err)
			}
			again, err := after.Submit(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if obs, err := after.Observe(context.Background(), w, again); err != nil || obs.State != generation.Running {
				t.Fatalf("the stage submitted again: Observe(%q) = %+v, %v", again, obs, err)
			}
		})
	}
}

// backendsAcrossAMove is the Job backend of testdata/config.yaml with namespace from, the one a
// manager restarted with namespace to builds, and the cluster both use.
func backendsAcrossAMove(t *testing.T, from, to string) (before, after *Backend, c client.Client) {
	t.Helper()
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c = fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	cfg.Namespace = from
	if before, err = New(c, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Namespace = to
	if after, err = New(c, cfg); err != nil {
		t.Fatal(err)
	}
	return before, after, c
}
