package jobbackend

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Observe and Cancel trusted the namespace/name of the stage
// handle in the task's status, and read or deleted whatever Job it named.
//
// Interleaving: a task's status.stages[].handle says "kube-system/x" (or "acme/<another task's
// Job>"). A status is written by the manager, but also by anyone granted videotasks/status (a
// support tool, a kubectl edit --subresource=status, an older manager with another naming), and
// it is restored as is from a backup. The manager then Observes that handle: it reads a Job of
// kube-system with its own, cluster-wide, credentials, and hands that Job's result (another
// customer's video, say) to this task as its own; or, on cancel (the task deleted or its
// deadline passed), it deletes that Job: any Job of the cluster, whatever it runs.
//
// The fix: a handle is used only when it names the Job the backend would have made for the work
// (the name derived from its key, in the configured namespace or the task's own); Observe
// refuses any other as a permanent error (the stage fails, its points are refunded), and Cancel
// deletes the Job derived from the work instead, leaving the named one alone.
func TestAHandleThatIsNotTheWorksJobIsNeitherReadNorDeleted(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml") // namespace "": Jobs in the task's namespace
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageRender)
	other := testWork(videogenv1alpha1.StageRender)
	other.Task, other.TaskUID = "someone-elses", "1111-uid"
	other.Key = generation.WorkKey(other.Namespace, other.Task, other.TaskUID, other.Stage)

	for _, foreign := range []string{
		"kube-system/x",
		"kube-system/" + JobName(w.Key, w.Stage),      // the right name, a namespace no rule gives
		handle(cfg.jobKey(other)),                     // another task's Job in the same namespace
		w.Namespace + "/" + JobName(w.Key, "analyze"), // the same task's other stage
	} {
		t.Run(foreign, func(t *testing.T) {
			ns, name, _ := cutHandle(foreign)
			victim := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			var touched []string
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(victim).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						touched = append(touched, "get "+key.String())
						return c.Get(ctx, key, obj, opts...)
					},
				}).Build()
			b, err := New(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			mine, err := b.Submit(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}

			_, err = b.Observe(context.Background(), w, foreign)
			if !generation.IsPermanent(err) {
				t.Errorf("Observe(%q) = %v, want a permanent error refusing the handle", foreign, err)
			}
			for _, op := range touched {
				if op == "get "+foreign {
					t.Errorf("Observe(%q) read that Job", foreign)
				}
			}

			if err := b.Cancel(context.Background(), w, foreign); err != nil {
				t.Errorf("Cancel(%q) = %v, want nil", foreign, err)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(victim), &batchv1.Job{}); err != nil {
				t.Errorf("Cancel(%q) deleted that Job: %v", foreign, err)
			}
			mk, _ := parseHandle(mine)
			if err := c.Get(context.Background(), mk, &batchv1.Job{}); err == nil {
				t.Errorf("Cancel(%q) left the work's own Job %s running", foreign, mine)
			}
		})
	}
}

// Checked, holds: the handles the backend itself gives out, in the configured namespace or (the
// configured namespace set since the Job was made) in the task's own, are still used.
func TestTheWorksOwnHandlesAreStillUsed(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageAnalyze)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	b, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := b.Observe(context.Background(), w, h); err != nil || obs.State != generation.Running {
		t.Fatalf("Observe(own handle %q) = %+v, %v", h, obs, err)
	}
	// Jobs moved to a namespace of their own: the manager's cache no longer covers the task's
	// namespace (cache_namespace_moved_test.go), so the stage of a task started before
	// is reported lost, to be submitted again where Jobs run now, as after any other move; its
	// old Job is deleted (by its labels) and Cancel with the old handle is fine.
	cfg.Namespace = "videogen-jobs"
	b, err = New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Observe(context.Background(), w, h); !generation.IsLost(err) {
		t.Fatalf("after the namespace changed, Observe(%q) = %v; want lost", h, err)
	}
	if err := b.Cancel(context.Background(), w, h); err != nil {
		t.Fatal(err)
	}
	key, _ := parseHandle(h)
	if err := c.Get(context.Background(), key, &batchv1.Job{}); err == nil {
		t.Errorf("Cancel(%q) left its Job", h)
	}
}

func cutHandle(h string) (string, string, bool) {
	k, err := parseHandle(h)
	return k.Namespace, k.Name, err == nil
}

// With the handle check above: a handle that is no namespace/name at all (a status
// written by hand, cut short) made Cancel fail without deleting anything. A deleted task's
// finalizer retried that for CancelGrace, then let the task go with its Job running to its
// deadline, unpaid. Cancel now deletes the Job derived from the work, as for an empty handle.
func TestCancelWithAMalformedHandleStillDeletesTheWorksJob(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageAnalyze)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	b, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel(context.Background(), w, "not-a-handle"); err != nil {
		t.Errorf("Cancel with a malformed handle = %v, want nil", err)
	}
	key, _ := parseHandle(h)
	if err := c.Get(context.Background(), key, &batchv1.Job{}); err == nil {
		t.Errorf("Cancel with a malformed handle left the work's Job %s running", h)
	}
}
