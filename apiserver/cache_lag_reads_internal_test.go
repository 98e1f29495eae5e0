package apiserver

// The read and control paths (GET
// /v1/tasks, GET /v1/tasks/{id}, POST /v1/tasks/{id}/cancel) while a replica's informer cache
// lags the kube-apiserver. Two fake clients stand for one replica: cache is what its informer
// has seen so far, cluster what the kube-apiserver holds (its APIReader, and where its writes
// land).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

// laggingReplica is a Server whose cache holds cached and whose kube-apiserver holds cluster.
// Writes go to the cache's client, as the cached client of controller-runtime sends them to
// the kube-apiserver: the interceptor passes them on to cluster.
func laggingReplica(t *testing.T, cached, cluster []client.Object) (*Server, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := videogenv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	truth := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cluster...).Build()
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached...).Build()
	return New(Config{Client: writesTo{Client: cache, cluster: truth}, APIReader: truth}), truth
}

// writesTo reads from the embedded (cache) client and writes to cluster.
type writesTo struct {
	client.Client
	cluster client.Client
}

func (w writesTo) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return w.cluster.Patch(ctx, obj, patch, opts...)
}

func taskAt(name string, created time.Time, uid string, phase videogenv1alpha1.TaskPhase) *videogenv1alpha1.VideoTask {
	vt := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: name,
		UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}}
	vt.Spec.Capability = videogenv1alpha1.CapabilityShort
	vt.Status.Phase = phase
	if phase == videogenv1alpha1.TaskSucceeded {
		vt.Status.Charge = videogenv1alpha1.ChargeDeducted
		vt.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://cdn.example.com/old-render.mp4"}
	}
	return vt
}

// What breaks: GET /v1/tasks places the `after` cursor only in this replica's cache; a cursor
// the cache has not seen yet is answered 400 "no task with id … (finished tasks are deleted a
// while after they end: list again from the first page)", for a task that exists, is not
// finished, and was handed out as the cursor by the service itself.
//
// Interleaving: with several REST replicas behind one Service, a client creates a task
// (through any replica) and lists with limit=1 (a "latest task" poll, or any page whose last
// task is a new one) through replica A, whose informer has seen the new task: page 1 ends with
// it, has_more true. It asks for page 2 with after=<that id>; the Service sends this request to
// replica B, whose informer has not received the task's ADDED event yet (watch lag of tens to
// hundreds of milliseconds is ordinary; seconds under a loaded kube-apiserver). Every step is
// a plain client request; nothing but the replicas' informer lag is involved.
//
// What the user sees: 400 invalid_request that blames the client's cursor and tells it its
// task was deleted; a pager that obeys starts over, and one that does not stops listing.
// Reading the cursor's task around the cache (as GET /v1/tasks/{id} does on a miss) places it.
func TestAListCursorTheCacheHasNotSeenYetIsPlacedNotRefused(t *testing.T) {
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	older := taskAt("vt-older", base, "u1", videogenv1alpha1.TaskSucceeded)
	old := taskAt("vt-old", base.Add(time.Minute), "u2", videogenv1alpha1.TaskRunning)
	fresh := taskAt("vt-fresh", base.Add(time.Hour), "u3", videogenv1alpha1.TaskQueued)
	// Replica B: its cache has the two old tasks, the kube-apiserver has all three.
	srv, _ := laggingReplica(t, []client.Object{older.DeepCopy(), old.DeepCopy()},
		[]client.Object{older.DeepCopy(), old.DeepCopy(), fresh.DeepCopy()})

	req := httptest.NewRequest(http.MethodGet, "/v1/tasks?limit=1&after=vt-fresh", nil)
	rec := serveAs(srv.listTasks, "acct", req)
	if rec.Code != http.StatusOK {
		code, msg := errorOf(t, rec)
		t.Fatalf("page 2 after a task that exists: %d %s %q, want 200 with the task after it", rec.Code, code, msg)
	}
	var page list[taskview.Task]
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "vt-old" || !page.HasMore {
		t.Fatalf("page 2 = %s, want [vt-old] with has_more", rec.Body)
	}
}

// Checked, holds: a cursor whose task is gone (deleted after --finished-task-ttl) is still
// the documented 400, not a 500 nor a page from somewhere else.
func TestAListCursorOfADeletedTaskIsStillA400(t *testing.T) {
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	old := taskAt("vt-old", base, "u2", videogenv1alpha1.TaskRunning)
	srv, _ := laggingReplica(t, []client.Object{old.DeepCopy()}, []client.Object{old.DeepCopy()})
	rec := serveAs(srv.listTasks, "acct", httptest.NewRequest(http.MethodGet, "/v1/tasks?after=vt-gone", nil))
	if code, _ := errorOf(t, rec); rec.Code != http.StatusBadRequest || code != "invalid_request" {
		t.Fatalf("cursor of a deleted task: %d %s, want 400 invalid_request", rec.Code, code)
	}
}

// What breaks: POST /v1/tasks/{id}/cancel answers from the cache alone when the cache shows the
// task ended: 409 "already succeeded and cannot be canceled" without asking the kube-apiserver.
// A cache shows an ended task for a task that runs when the id was reused: an
// Idempotency-Key names the task (hash of account and key), a finished task is deleted after
// --finished-task-ttl and "keys are kept as long as the task" (docs/api.md), so the same key
// sent again later creates a new task of the same id. Until the replica's informer sees the
// DELETE and the ADDED, its cache holds the old, succeeded task under that id.
//
// Interleaving: task vt-k (key "nightly-1") succeeds and is deleted by the TTL collector; the
// client sends the same request with the same key again (through replica A): 202, a new vt-k,
// queued, its price frozen. It changes its mind at once and cancels it through replica B,
// whose informer has not received the delete nor the create yet.
//
// What the user sees: 409 conflict "task vt-k already succeeded", for a task that was just
// accepted and never succeeded; the client, told the cancel cannot happen, does not retry it,
// and the task runs and is charged in full. The cancel must ask the kube-apiserver (the patch
// does) before it refuses.
func TestACancelIsNotRefusedOnACacheThatStillShowsTheTasksPreviousIncarnation(t *testing.T) {
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	previous := taskAt("vt-k", base, "uid-previous", videogenv1alpha1.TaskSucceeded)
	current := taskAt("vt-k", base.Add(25*time.Hour), "uid-current", videogenv1alpha1.TaskQueued)
	current.Status.Charge = videogenv1alpha1.ChargeFrozen
	srv, cluster := laggingReplica(t, []client.Object{previous}, []client.Object{current})

	req := httptest.NewRequest(http.MethodPost, "/v1/tasks/vt-k/cancel", nil)
	req.SetPathValue("id", "vt-k")
	rec := serveAs(srv.cancelTask, "acct", req)
	if rec.Code != http.StatusAccepted {
		code, msg := errorOf(t, rec)
		t.Fatalf("cancel of a queued task: %d %s %q, want 202", rec.Code, code, msg)
	}
	var view taskview.Task
	if err := json.Unmarshal(rec.Body.Bytes(), &view); err != nil {
		t.Fatal(err)
	}
	if view.Status != taskview.StatusQueued || view.Result != nil {
		t.Errorf("202 shows %s with result %v: the previous task's state, not this one's", view.Status, view.Result)
	}
	stored := &videogenv1alpha1.VideoTask{}
	if err := cluster.Get(req.Context(), client.ObjectKey{Namespace: "acct", Name: "vt-k"}, stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Annotations[videogenv1alpha1.AnnotationCancelRequested]; !ok {
		t.Errorf("the running task was not asked to cancel: annotations %v", stored.Annotations)
	}
}

// Checked, holds: a cancel of a task that did end (cache and cluster agree) is the
// documented 409, and nothing is written to the task.
func TestACancelOfATaskThatSucceededIsA409AndWritesNothing(t *testing.T) {
	done := taskAt("vt-done", time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), "u", videogenv1alpha1.TaskSucceeded)
	srv, cluster := laggingReplica(t, []client.Object{done.DeepCopy()}, []client.Object{done.DeepCopy()})
	req := httptest.NewRequest(http.MethodPost, "/v1/tasks/vt-done/cancel", nil)
	req.SetPathValue("id", "vt-done")
	rec := serveAs(srv.cancelTask, "acct", req)
	if code, _ := errorOf(t, rec); rec.Code != http.StatusConflict || code != "conflict" {
		t.Fatalf("cancel of a succeeded task: %d %s, want 409 conflict", rec.Code, code)
	}
	stored := &videogenv1alpha1.VideoTask{}
	if err := cluster.Get(req.Context(), client.ObjectKey{Namespace: "acct", Name: "vt-done"}, stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Annotations[videogenv1alpha1.AnnotationCancelRequested]; ok {
		t.Errorf("a succeeded task was annotated for cancel")
	}
}

// Checked, holds: another account's task id is not found in every read and control path,
// and its cancel writes nothing; the list cursor, now also read around the cache, stays in the
// caller's account (an `after` naming another account's task places nothing: 400).
func TestAnotherAccountsTaskIsNotFoundByGetCancelOrCursor(t *testing.T) {
	theirs := taskAt("vt-theirs", time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), "u", videogenv1alpha1.TaskRunning)
	theirs.Namespace = "other"
	mine := taskAt("vt-mine", time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), "m", videogenv1alpha1.TaskRunning)
	srv, cluster := laggingReplica(t, []client.Object{mine.DeepCopy()}, []client.Object{theirs.DeepCopy(), mine.DeepCopy()})

	get := httptest.NewRequest(http.MethodGet, "/v1/tasks/vt-theirs", nil)
	get.SetPathValue("id", "vt-theirs")
	if rec := serveAs(srv.getTask, "acct", get); rec.Code != http.StatusNotFound {
		t.Errorf("GET of another account's task: %d %s, want 404", rec.Code, rec.Body)
	}
	cancel := httptest.NewRequest(http.MethodPost, "/v1/tasks/vt-theirs/cancel", nil)
	cancel.SetPathValue("id", "vt-theirs")
	if rec := serveAs(srv.cancelTask, "acct", cancel); rec.Code != http.StatusNotFound {
		t.Errorf("cancel of another account's task: %d %s, want 404", rec.Code, rec.Body)
	}
	stored := &videogenv1alpha1.VideoTask{}
	if err := cluster.Get(cancel.Context(), client.ObjectKeyFromObject(theirs), stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Annotations[videogenv1alpha1.AnnotationCancelRequested]; ok {
		t.Errorf("another account's task was annotated for cancel")
	}
	rec := serveAs(srv.listTasks, "acct", httptest.NewRequest(http.MethodGet, "/v1/tasks?after=vt-theirs", nil))
	if code, _ := errorOf(t, rec); rec.Code != http.StatusBadRequest || code != "invalid_request" {
		t.Errorf("after= another account's task: %d %s, want 400 invalid_request", rec.Code, rec.Body)
	}
}
