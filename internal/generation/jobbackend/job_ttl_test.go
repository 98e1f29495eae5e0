package jobbackend

import (
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// ttlSecondsAfterFinished deleted a finished Job, and
// the pod whose termination message is the only copy of its result, whether or not the
// controller had read it.
//
// Interleaving: a render Job completes while the manager is down (a failed rollout, a lost
// leader election, a node outage: longer than the TTL, default an hour); the TTL controller,
// part of kube-controller-manager and not of ours, deletes the Job and its pods; the manager
// comes back, Observe finds no Job and fails the stage ("Job ... no longer exists: it was
// deleted before the render stage finished", which is not even true). What the user sees: a
// task failed and refunded although its video was rendered; the GPU time is lost.
//
// The fix: a Job in its task's namespace carries no TTL. Its task owns it, so the garbage
// collector deletes it with the task, which happens only after the manager read the result
// (the finished-task collector deletes terminal, closed tasks, at --finished-task-ttl, and
// runs in the manager), or when the task is deleted, when the result is wanted by no one. A
// Job in a separate namespace, which nothing owns, keeps the TTL as its only cleanup.
func TestAnOwnedJobIsNotDeletedByATTLBeforeItsResultIsRead(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml") // namespace "", ttlSecondsAfterFinished: 3600
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageRender)
	job := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w))
	if len(job.OwnerReferences) != 1 {
		t.Fatalf("owner references = %v, want the task", job.OwnerReferences)
	}
	if ttl := job.Spec.TTLSecondsAfterFinished; ttl != nil {
		t.Errorf("a Job its task owns has ttlSecondsAfterFinished %d: a manager down longer than that loses the finished render's result", *ttl)
	}

	cfg.Namespace = "videogen-jobs"
	job = cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w))
	if len(job.OwnerReferences) != 0 || job.Spec.TTLSecondsAfterFinished == nil || *job.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("a Job in a separate namespace: owners %v, TTL %v; want none and the configured 3600", job.OwnerReferences, job.Spec.TTLSecondsAfterFinished)
	}
}
