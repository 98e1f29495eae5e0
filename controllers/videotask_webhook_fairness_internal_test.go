package controllers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// One account's hanging webhook
// receiver held every delivery worker, so every other account's completion webhooks waited
// behind it.
//
// Interleaving: account A (namespace acct-a) has many tasks whose webhook_url points at a
// receiver that accepts the connection and never answers (reachable: any customer can submit
// tasks with any public webhook_url, e.g. a server that stalls, by accident or on purpose). The
// tasks end together, so the webhook controller's queue holds all of them before account B's
// task. Its DefaultWebhookConcurrency (16) workers each take one of A's tasks and wait in the
// POST up to --webhook-timeout (10 s); a failed attempt is retried 5 s later, so 1000 such
// tasks make 2000 attempts of 10 s in 16 workers: B's webhook, and every other account's,
// came about 20 minutes late (and again at each later step of A's retry schedule). Here the
// 16 workers are 16 concurrent Reconciles of A's tasks; the receiver hangs until the test
// ends, so no timing is asserted: the test waits (up to a generous bound) until each of the
// 16 either reached the receiver or returned.
//
// Before the fix: all 16 reached the hanging receiver and none returned: no worker is left
// for B. Want: a host (and an account) gets a bounded share of the workers; the deliveries
// over that share are requeued at once, without an attempt recorded (status.webhook stays
// nil: not counted as failed), so a worker is free, B's webhook is delivered while A's
// receiver still hangs, and once A's receiver answers A's held-back tasks are delivered too
// (at least once: nothing dropped).
//
// The second case is the same account with a receiver per task (one host name each, as a
// wildcard DNS name gives for free): a bound per host alone would not hold it, so an account
// gets a bounded share too (with the host bound only, this case failed as before the fix:
// "all 16 webhook workers wait").
func TestOneAccountsHangingReceiverDoesNotHoldEveryWebhookWorker(t *testing.T) {
	t.Run("one receiver", func(t *testing.T) { hangingReceivers(t, 1) })
	t.Run("a receiver per task", func(t *testing.T) { hangingReceivers(t, DefaultWebhookConcurrency) })
}

func hangingReceivers(t *testing.T, receivers int) {
	now := time.Now().Truncate(time.Second)
	release := make(chan struct{})
	var reached atomic.Int32
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	})
	var hanging []*httptest.Server
	for range receivers {
		hanging = append(hanging, httptest.NewServer(hang))
	}
	var once sync.Once
	unhang := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() {
		unhang()
		for _, srv := range hanging {
			srv.Close()
		}
	})
	fastURL, fastIDs := scriptedReceiver(t, http.StatusNoContent)

	const workers = DefaultWebhookConcurrency
	var objs []client.Object
	var aTasks []*videogenv1alpha1.VideoTask
	for i := range workers {
		task := finishedTaskWithWebhook(now, hanging[i%receivers].URL+"/hook", 0)
		task.Namespace, task.Name, task.UID = "acct-a", fmt.Sprintf("task-a-%02d", i), types.UID(fmt.Sprintf("uid-a-%04d", i))
		aTasks = append(aTasks, task)
		objs = append(objs, task)
	}
	bTask := finishedTaskWithWebhook(now, fastURL+"/hook", 0)
	bTask.Namespace, bTask.Name, bTask.UID = "acct-b", "task-b", "uid-b"
	objs = append(objs, bTask)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, accountNamespace("acct-a"), accountNamespace("acct-b"))...).
		WithStatusSubresource(objs...).Build()
	r := newWebhookReconciler(c, now)
	// No timeout within the test: the receiver hangs until released.
	r.Config.Client = outbound.NewClient(nil, time.Minute)
	r.Config.Concurrency = workers
	ctx := context.Background()
	for _, ns := range []string{"acct-a", "acct-b"} { // the signing secrets exist already
		if _, err := r.Secrets.Ensure(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}

	type outcome struct {
		i   int
		res ctrl.Result
		err error
	}
	done := make(chan outcome, workers)
	for i, task := range aTasks {
		go func() {
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)})
			done <- outcome{i, res, err}
		}()
	}
	// Every worker either waits at A's receiver or has returned.
	var returned []outcome
	deadline := time.After(30 * time.Second)
	for int(reached.Load())+len(returned) < workers {
		select {
		case o := <-done:
			returned = append(returned, o)
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after 30 s: %d at the receiver, %d returned, of %d", reached.Load(), len(returned), workers)
		}
	}
	if len(returned) == 0 {
		t.Fatalf("all %d webhook workers wait on account A's hanging receiver (%d connections): account B's webhook, and everyone else's, waits behind A's tasks' timeouts",
			workers, reached.Load())
	}
	for _, o := range returned {
		if o.err != nil || o.res.RequeueAfter <= 0 {
			t.Fatalf("held-back delivery of %s: result %+v err %v, want requeued", aTasks[o.i].Name, o.res, o.err)
		}
		got := &videogenv1alpha1.VideoTask{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(aTasks[o.i]), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Webhook != nil {
			t.Fatalf("held-back delivery of %s recorded %+v, want no attempt counted", got.Name, got.Status.Webhook)
		}
	}

	// A free worker delivers B's webhook while A's receiver still hangs.
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(bTask)}); err != nil {
		t.Fatal(err)
	}
	if ids := fastIDs(); len(ids) != 1 || ids[0] != WebhookID(bTask) {
		t.Fatalf("account B's receiver got %v, want its one delivery while A's receiver hangs", ids)
	}

	// A's receiver answers: the deliveries in flight end, and the held-back ones go out when
	// their requeue comes (nothing was dropped or counted as failed).
	unhang()
	for range workers - len(returned) {
		if o := <-done; o.err != nil {
			t.Fatal(o.err)
		}
	}
	for _, o := range returned {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(aTasks[o.i])}); err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range aTasks {
		got := &videogenv1alpha1.VideoTask{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
			t.Fatal(err)
		}
		if w := got.Status.Webhook; w == nil || w.State != videogenv1alpha1.WebhookDelivered || w.Attempts != 1 {
			t.Fatalf("%s: webhook %+v, want delivered at attempt 1", task.Name, w)
		}
	}
	if n := len(r.inFlight.count); n != 0 {
		t.Fatalf("the limiter still counts %v with nothing in flight, want its map empty (bounded by the deliveries in flight)", r.inFlight.count)
	}
}
