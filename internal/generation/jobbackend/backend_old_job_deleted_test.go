package jobbackend

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// The old Job of a moved stage is deleted (docs/job-backend.md said "the old Job runs on to its
// own deadline"). The Job backend's namespace moves across a manager restart (jobs.yaml
// namespace: videogen-jobs → "" or → gpu-jobs;
// TestAStageWhoseJobNamespaceWasMovedIsSubmittedAgainNotFailed).
// Interleaving: 1. a render runs as the Job videogen-jobs/vt-…-render. 2. The namespace is
// changed and the manager restarted. 3. The new manager's Observe of that handle reports the
// stage lost without touching videogen-jobs (backend_handle_test.go: a handle must not make the manager
// read or delete a Job in a namespace it does not use); the controller submits the stage again
// in the new namespace and drops the old handle from the status. 4. The task ends (its new
// Job is cancelled or completes). Nothing ever deletes the first Job: it has no owner reference
// (a Job outside its task's namespace cannot), so neither the task's deletion nor the collector
// takes it; it runs on, holding its GPU, to its activeDeadlineSeconds (the task's deadline plus
// a minute: up to 30 days) and then lingers for its TTL. What the operators see: GPU nodes busy
// with Jobs of tasks long finished (each stage running in both namespaces for its whole run),
// paid for by nobody; the user sees nothing, except that the queue is slower.
// The fix: the backend deletes the old Job when it sees the moved handle (Observe reporting it
// lost, or Cancel), without trusting the namespace the handle names, which backend_handle_test.go forbids it to
// read or delete by name in (its test keeps kube-system/<the work's own Job name> untouched):
// it deletes there, by label (deletecollection), only the Jobs that carry the work's own labels
// (this backend's, the task's UID, the stage). A Job of another task there stays.
func TestAJobLeftInTheOldNamespaceIsDeleted(t *testing.T) {
	for _, move := range []struct{ from, to string }{
		{"videogen-jobs", ""},
		{"videogen-jobs", "gpu-jobs"},
	} {
		t.Run(move.from+" to "+move.to, func(t *testing.T) {
			w := testWork(videogenv1alpha1.StageRender)
			before, after, c := backendsAcrossAMove(t, move.from, move.to)
			old, err := before.Submit(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			// Another task's render, in the old namespace too: it is not this work's to stop.
			other := testWork(videogenv1alpha1.StageRender)
			other.Task, other.TaskUID = "someone-elses", "1111-uid"
			other.Key = generation.WorkKey(other.Namespace, other.Task, other.TaskUID, other.Stage)
			otherHandle, err := before.Submit(context.Background(), other)
			if err != nil {
				t.Fatal(err)
			}

			if _, err := after.Observe(context.Background(), w, old); !generation.IsLost(err) {
				t.Fatalf("Observe(%q) = %v; want lost", old, err)
			}
			again, err := after.Submit(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if err := after.Cancel(context.Background(), w, again); err != nil { // the task ends
				t.Fatal(err)
			}
			key, _ := parseHandle(old)
			var job batchv1.Job
			if err := c.Get(context.Background(), key, &job); err == nil && job.DeletionTimestamp == nil {
				t.Errorf("the stage's first Job %s still runs after its task ended (it runs to its activeDeadlineSeconds)", old)
			}
			otherKey, _ := parseHandle(otherHandle)
			if err := c.Get(context.Background(), otherKey, &job); err != nil || job.DeletionTimestamp != nil {
				t.Errorf("another task's Job %s was deleted: %v", otherHandle, err)
			}
		})
	}
}
