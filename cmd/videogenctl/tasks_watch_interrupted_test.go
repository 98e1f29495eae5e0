package main

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// `task watch NAME` interrupted before the task ended does not exit 0. Interleaving: a script
// (or a CI job) runs `videogenctl task watch vt-1 -n acme && publish`; the task is running,
// the watch has printed it and waits for its next change; then the watch is interrupted
// (Ctrl-C, or the CI runner cancelling the job with SIGINT; main turns SIGINT into the end of
// the command's context). Before the fix the watch loop saw its channel close, found the
// context done and returned nil: exit status 0, which the help defines as "the task
// succeeded", for a task still running (it may yet fail). `&& publish` ran on no result. Now an
// interrupted watch is one that could not follow the task: exit status 2 and a message.
// Here the interruption comes when the task's second row has been printed, so the watch is
// certainly in its event loop, where the bug was.
func TestInterruptedWatchIsNotSuccess(t *testing.T) {
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

	watchCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	// The first row (from the list) moves the task on; the second (from the watch) interrupts.
	out := &onWrite{do: func(n int) {
		switch n {
		case 1:
			task.Status.Progress = 60
			if err := c.Status().Update(ctx, task); err != nil {
				t.Error(err)
			}
		case 2:
			interrupt()
		}
	}}
	done := make(chan error, 1)
	go func() {
		done <- run(watchCtx, []string{"task", "watch", "vt-1", "-n", "acme", "--kubeconfig", kubeconfig}, out)
	}()
	select {
	case err := <-done:
		if out.writes() < 2 {
			t.Fatalf("the watch ended after %d rows: %v", out.writes(), err)
		}
		if err == nil || exitCode(err) != exitWatchFailed {
			t.Errorf("task watch interrupted while the task runs: %v (exit status %d, want %d: 0 says it succeeded)", err, exitCode(err), exitWatchFailed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end when interrupted")
	}
}

// onWrite calls do with the count of writes so far, after each write.
type onWrite struct {
	mu sync.Mutex
	n  int
	do func(n int)
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.n++
	n := w.n
	w.mu.Unlock()
	w.do(n)
	return len(p), nil
}

func (w *onWrite) writes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}
