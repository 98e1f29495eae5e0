package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// scriptedReceiver is a completion webhook receiver answering a scripted status per delivery
// (the last one repeats); it counts deliveries and keeps their webhook-ids.
func scriptedReceiver(t *testing.T, statuses ...int) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		code := statuses[min(len(ids), len(statuses))-1]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ids...) }
}

// finishedTaskWithWebhook is a succeeded, settled task whose completion webhook has had attempts
// failed attempts and whose next one is due.
func finishedTaskWithWebhook(now time.Time, url string, attempts int32) *videogenv1alpha1.VideoTask {
	completed := metav1.NewTime(now.Add(-time.Hour))
	cost := int64(10)
	task := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acct-adv21", Name: "task-adv21", UID: "0b8f3c1e-adv21"},
		Spec:       videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, WebhookURL: url},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Charge: videogenv1alpha1.ChargeDeducted,
			Cost: &cost, CompletedAt: &completed},
	}
	if attempts > 0 {
		last, due := metav1.NewTime(now.Add(-10*time.Second)), metav1.NewTime(now.Add(-5*time.Second))
		task.Status.Webhook = &videogenv1alpha1.WebhookDelivery{ID: WebhookID(task), State: videogenv1alpha1.WebhookPending,
			DeliveryAttempts: videogenv1alpha1.DeliveryAttempts{Attempts: attempts, LastStatus: 503,
				LastError: "receiver answered 503 Service Unavailable", LastAttemptAt: &last, NextAttemptAt: &due}}
	}
	return task
}

// accountNamespace is an account's namespace: its signing secret is made for its UID.
func accountNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
}

func newWebhookReconciler(c client.Client, now time.Time) *VideoTaskWebhookReconciler {
	return &VideoTaskWebhookReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100),
		Clock:   clocktesting.NewFakePassiveClock(now),
		Secrets: &webhooksecrets.Store{Client: c, Reader: c, Namespace: "videogen-system"},
		Config:  WebhookConfig{Client: outbound.NewClient(nil, 5*time.Second), SecretNamespace: "videogen-system"}}
}

// FAILED before the fix ("the receiver got 2 deliveries ... want 1"): the record of a retry
// that met a conflict with a write that did not touch the delivery was dropped, and the
// delivery was made again.
//
// The reconciler keeps, before its status write, the delivery as it was read ("attempted"), so
// that on a 409 it can tell a write that did not touch the delivery (retry the record on the
// newer copy) from another attempt's record (keep that one). But d aliased
// task.Status.Webhook, and outbound.Record and the state switch changed it in place before the
// copy was taken: "attempted" was already the new record. From the second attempt on, the
// newer copy's delivery (the old one) never equalled it, so every such conflict read as "raced"
// and the attempt was not recorded.
//
// Interleaving (attempt 1 failed with 503; attempt 2 is due):
//  1. The reconcile reads the task, POSTs attempt 2; the receiver, recovered, answers 200.
//  2. Meanwhile the task was written by something else that leaves status.webhook alone: a
//     label or annotation by kubectl, the main controller taking a finalizer off (a delivery
//     may wait up to --webhook-timeout, 10 s, so the window is wide). The status write of the
//     record answers 409 Conflict.
//  3. The retry reads the newer copy: its webhook is still attempt 1 Pending, "attempted" is
//     attempt 2 Delivered, so they differ: errWebhookRaced, nothing recorded, requeue.
//  4. The next reconcile reads attempt 1 Pending, due: it POSTs the completion again.
//
// What a user sees: the same completion webhook twice (same webhook-id, but a receiver that
// does not deduplicate acts on it twice), against the comment's promise that such a conflict
// "does not cost a second delivery"; with a receiver still failing, attempts are made back to
// back instead of on the schedule.
func TestWebhookRecordSurvivesAConflictOnALaterAttempt(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	url, deliveries := scriptedReceiver(t, http.StatusOK)
	task := finishedTaskWithWebhook(now, url, 1)

	conflicted := false
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(task, accountNamespace(task.Namespace)).WithStatusSubresource(task).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if !conflicted {
					// Step 2: someone labels the task while the attempt was on the wire.
					conflicted = true
					other := &videogenv1alpha1.VideoTask{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
						return err
					}
					other.Labels = map[string]string{"team": "growth"}
					if err := c.Update(ctx, other); err != nil {
						return err
					}
				}
				return c.SubResource(sub).Update(ctx, obj, opts...) // 409 on the first: stale resourceVersion
			},
		}).Build()
	r := newWebhookReconciler(c, now)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)}

	for i := 0; i < 5; i++ {
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("reconcile %d: %v", i+1, err)
		}
		if res.RequeueAfter == 0 {
			break
		}
	}
	got := &videogenv1alpha1.VideoTask{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if !conflicted {
		t.Fatal("the record's write never met the conflict")
	}
	if ids := deliveries(); len(ids) != 1 {
		t.Fatalf("the receiver got %d deliveries (%v) of one completion, want 1: the conflict cost a second delivery", len(ids), ids)
	}
	if w := got.Status.Webhook; w == nil || w.State != videogenv1alpha1.WebhookDelivered || w.Attempts != 2 || !got.Status.Closed {
		t.Fatalf("webhook %+v closed %v, want Delivered at attempt 2 and the task closed", got.Status.Webhook, got.Status.Closed)
	}
}

// webhookAttemptsCount reads videogen_task_webhook_attempts_total{outcome}.
func webhookAttemptsCount(t *testing.T, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	if err := webhookAttempts.WithLabelValues(outcome).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// FAILED before the fix ("0 WebhookFailed events, gave_up +0"): a completion webhook given up
// by a status write that landed but answered an error was never told. The Warning event
// WebhookFailed (which the alert VideogenCompletionWebhooksGivenUp points to, to name the
// tasks) and the gave_up count are emitted only after a write that answered nil; the error
// brings a reconcile that reads the stored Failed delivery, which is no longer due, and stops.
// The PaymentEvent deliveries were fixed for the same; this controller was not.
//
// Interleaving (schedule of 1 retry; attempt 1 failed, attempt 2 is due):
//  1. Attempt 2 is answered 503: the schedule is done, the delivery is Failed in memory.
//  2. The status write commits in etcd but the manager's request times out (an apiserver
//     under load answers 504 after the write, or the connection drops after it): reachable
//     whenever the apiserver is slow, and under load is when receivers fail too.
//  3. The reconcile returns the error; the next one reads the task Failed and closed: not due.
//
// What an operator sees: nothing. No alert fires, no Warning event names the task; its
// receiver never learnt that the task finished, and the task is collected at its TTL.
func TestWebhookGiveUpWhoseWriteLandsButErrsIsTold(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	url, deliveries := scriptedReceiver(t, http.StatusServiceUnavailable)
	task := finishedTaskWithWebhook(now, url, 1)

	erred := false
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(task, accountNamespace(task.Namespace)).WithStatusSubresource(task).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || erred {
					return err
				}
				erred = true // step 2: it landed, and the answer is a timeout
				return apierrors.NewTimeoutError("the request did not complete in time", 1)
			},
		}).Build()
	r := newWebhookReconciler(c, now)
	r.Config.Schedule = outbound.Steps{5 * time.Second}
	recorder := events.NewFakeRecorder(100)
	r.Recorder = recorder
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)}
	gaveUpBefore := webhookAttemptsCount(t, "gave_up")

	_, err := r.Reconcile(context.Background(), req) // the write lands and errs (either answer is fine)
	if !erred {
		t.Fatalf("the record's write never erred (reconcile: %v)", err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil { // the retry the error brings
		t.Fatalf("reconcile 2: %v", err)
	}
	got := &videogenv1alpha1.VideoTask{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if w := got.Status.Webhook; w == nil || w.State != videogenv1alpha1.WebhookFailed || w.Attempts != 2 || len(deliveries()) != 1 {
		t.Fatalf("webhook %+v after %d deliveries, want Failed at attempt 2 (Checked, holds: not sent again)", got.Status.Webhook, len(deliveries()))
	}
	failed := 0
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, "WebhookFailed") {
			failed++
		}
	}
	if gaveUp := webhookAttemptsCount(t, "gave_up") - gaveUpBefore; failed != 1 || gaveUp != 1 {
		t.Fatalf("%d WebhookFailed events, gave_up +%v; the task's delivery was given up once and must be told once", failed, gaveUp)
	}
}

// FAILED before the fix ("webhook ... State:Pending ..., want Stopped at attempt 1"): a
// kubectl task's webhookURL that names a private address outright, written as resolvers and
// URL parsers read it too, with a trailing dot (http://10.0.0.1./hook) or in inet_aton's
// forms (http://2130706433/, http://0x7f.1/), was retried for the whole schedule (about 28 h,
// 8 attempts, the task open all that time) instead of being stopped at once as docs/api.md
// promises for "a webhookURL whose host is a refused literal address". CheckURL (the REST API's
// check) already reads these as the literal address they are; the dialer's literal check did
// not, so it asked DNS for "10.0.0.1." and the attempt was a Retry ("could not resolve host").
//
// Reachable: any tenant with kubectl create on VideoTasks (the CRD does not check the URL).
// What the user sees: a task whose webhook says pending for a day, last_error "could not
// resolve host", and no WebhookRefused event saying the URL can never be called.
func TestWebhookToAPrivateLiteralWrittenOtherwiseStopsAtOnce(t *testing.T) {
	for _, url := range []string{"http://10.0.0.1./hook", "http://127.0.0.1.:8080/hook", "http://2130706433/hook", "http://0x7f.1/hook"} {
		t.Run(url, func(t *testing.T) {
			now := time.Now().Truncate(time.Second)
			task := finishedTaskWithWebhook(now, url, 0)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(task, accountNamespace(task.Namespace)).WithStatusSubresource(task).Build()
			r := newWebhookReconciler(c, now)
			r.Config.Client = outbound.NewGuardedClient(netguard.Policy{}, 2*time.Second)
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(task)}
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := &videogenv1alpha1.VideoTask{}
			if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			if w := got.Status.Webhook; w == nil || w.State != videogenv1alpha1.WebhookStopped || w.Attempts != 1 || !got.Status.Closed {
				t.Fatalf("webhook %+v closed %v, want Stopped at attempt 1 and the task closed", got.Status.Webhook, got.Status.Closed)
			}
		})
	}
}
