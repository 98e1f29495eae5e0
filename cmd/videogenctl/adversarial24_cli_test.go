package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
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

// apikey list is newest first, as task list and account show's top-ups are. Input: an
// administrator issues a key for acme (its id happens to be 000000000000), a second later one
// for globex (aaaaaaaaaaaa), and a second later a new one for acme (ffffffffffff) to rotate the
// first; then `apikey list` (and `apikey list -n acme`) to find the old one to revoke. Before
// the fix the list came in the kube-apiserver's order, by Secret name, that is by the keys'
// random ids: neither by time nor by account, a different order for every set of keys, so
// the newest key was anywhere in the table and "the last one" in a script (`jq '.[0]'`) was a
// random key. The keys are Secrets as apikey create writes them, with ids chosen so that the
// ids' order is the oldest first; each waits for the next second (the kube-apiserver keeps
// creationTimestamp to the second) so that the three have different creation times.
func TestAdversarial24APIKeyListIsNewestFirst(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var last time.Time
	for _, k := range []struct{ id, account string }{{"000000000000", "acme"}, {"aaaaaaaaaaaa", "globex"}, {"ffffffffffff", "acme"}} {
		for !last.IsZero() && time.Now().Truncate(time.Second).Equal(last) {
			time.Sleep(10 * time.Millisecond) // until the next second: a condition, not a guess
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: apikeys.SecretName(k.id),
			Labels:      map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: k.account, apikeys.LabelKeyID: k.id},
			Annotations: map[string]string{apikeys.AnnotationDescription: "key " + k.id}}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		last = s.CreationTimestamp.Time
	}
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	out, err := cli("apikey", "list")
	if ids := regexp.MustCompile(`(?m)^([0-9a-f]{12})\s`).FindAllStringSubmatch(out, -1); err != nil || len(ids) != 3 ||
		ids[0][1] != "ffffffffffff" || ids[1][1] != "aaaaaaaaaaaa" || ids[2][1] != "000000000000" {
		t.Errorf("apikey list: %v; want the newest first (ffffffffffff, aaaaaaaaaaaa, 000000000000)\n%s", err, out)
	}
	out, err = cli("apikey", "list", "-n", "acme", "-o", "json")
	if err != nil || !regexp.MustCompile(`(?s)"id": "ffffffffffff".*"id": "000000000000"`).MatchString(out) {
		t.Errorf("apikey list -n acme -o json: %v; want ffffffffffff before 000000000000\n%s", err, out)
	}
}
