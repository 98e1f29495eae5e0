package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Adversarial round 24: videogenctl as a new user meets it.

// `task watch NAME` of a running task that is deleted answers "did not succeed" (exit status
// 1), as it does for a task that failed or was canceled, not "could not follow it" (2).
// Interleaving: 1. a script runs `videogenctl task watch vt-1 -n acme && publish || resubmit`
// on a running task; the CLI lists it (printing its row) and opens a watch from that listing.
// 2. The task is deleted (`kubectl delete videotask vt-1`, a tenant giving up on it, a
// namespace deleted): the kube-apiserver sends the watch its Deleted event, whose object is the
// task as it was, still Running. The help and the README define the exit status: 0 succeeded,
// 1 "ended otherwise", 2 "could not be followed (no such task, the cluster unreachable,
// interrupted before it ended)", telling the answer from an error as kubectl diff does. A
// deleted task has ended, without a result, for good: it is an answer. Before the fix the CLI
// exited 2, which a script reads as "the watch itself failed, try again": it ran the watch again,
// which said "no task" (2) forever, and never reached its `|| resubmit`; a canceled task, which
// the same deletion would have been through `task cancel`, exits 1. Here the deletion comes
// when the first row is printed, before the watch opens; the watch, opened from the listing's
// resourceVersion, is sent the Deleted event all the same, so the event path is what runs.
func TestAdversarial24WatchOfADeletedRunningTaskSaysItDidNotSucceed(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 20}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	watchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := &onWrite{do: func(n int) {
		if n == 1 { // step 2, once the listing's row is printed (no finalizer: gone at once)
			if err := c.Delete(ctx, task); err != nil {
				t.Error(err)
			}
		}
	}}
	err := run(watchCtx, []string{"task", "watch", "vt-1", "-n", "acme", "--kubeconfig", kubeconfig}, out)
	if watchCtx.Err() != nil {
		t.Fatalf("task watch did not end when the task was deleted: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "vt-1 was deleted") || exitCode(err) != 1 || !errors.Is(err, errTaskDidNotSucceed) {
		t.Errorf("task watch of a running task deleted: %v (exit status %d); want \"task vt-1 was deleted ...\", exit status 1 as for a failed task", err, exitCode(err))
	}
}

var _ = bytes.Buffer{}
