package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// pendingEventNamed is pendingEvent under another name, so that several live in one fake client.
func pendingEventNamed(name string, now time.Time, sinks ...string) *videogenv1alpha1.PaymentEvent {
	pe := pendingEvent(now, 0, sinks...)
	pe.Name = name
	for i := range pe.Status.Sinks {
		pe.Status.Sinks[i].WebhookID = paymentevents.WebhookID(name, pe.Status.Sinks[i].Name)
	}
	return pe
}

// FAILED before the fix ("a second attempt reached the hanging sink adv20-slow: one more
// delivery worker is held"): every reconcile made all its due attempts and waited for them, up
// to the sink's timeout (at most 1m), with nothing bounding how many of the controller's
// workers (4) wait on the same sink at once.
//
// Interleaving (sink adv20-slow blackholed: it accepts the connection and never answers;
// sink adv20-ok healthy):
//  1. Worker 1 reconciles event A, due for adv20-slow: its attempt hangs.
//  2. Worker 2 reconciles event B, also due for adv20-slow: before the fix it makes a second
//     attempt at the hanging sink and hangs as well; so do workers 3 and 4 with C and D.
//  3. Event H, due for adv20-ok, waits in the queue until one of those attempts times out;
//     with many events pending for adv20-slow (a sink down during a burst of webhooks, or a
//     processor replaying its backlog), each freed worker takes the next adv20-slow event and
//     H waits behind all of them: delay unbounded in the number of events for the bad sink.
//
// Every step is reachable: a sink behind a firewall that drops packets, or a receiver that
// deadlocks, holds each attempt for its full timeout; the workqueue hands keys out in order.
// What a user sees: the billing sink gets a dispute minutes to hours late because the audit
// sink hangs.
//
// Fixed: at most MaxInFlightPerSink attempts per sink are in flight across all workers
// (default 2, and the default number of workers is more than 16 sinks × 2, so hanging sinks
// can never hold them all). A due row whose sink is busy is left as it is (not attempted, no
// attempt counted, no outcome) and its event requeued after 1-2 s.
func TestHangingSinkDoesNotHoldEveryWorker(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	arrived, release := make(chan struct{}, 8), make(chan struct{})
	slowSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(slowSrv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	slow := paymentevents.Sink{Name: "adv20-slow", URL: slowSrv.URL, Secret: standardwebhooks.NewSecret(), Timeout: metav1.Duration{Duration: time.Minute}}
	ok, okHits := scriptedSink(t, "adv20-ok", http.StatusOK)

	a, b, h := pendingEventNamed("stripe-adv20-a", now, slow.Name), pendingEventNamed("stripe-adv20-b", now, slow.Name), pendingEventNamed("stripe-adv20-h", now, ok.Name)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(a, b, h).WithStatusSubresource(a, b, h).Build()
	r := &PaymentEventReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100),
		Clock: clocktesting.NewFakePassiveClock(now), Jitter: func() float64 { return 0 },
		Options: PaymentEventOptions{HTTPClient: paymentevents.NewHTTPClient(), MaxInFlightPerSink: 1,
			Sinks: paymentevents.StaticSinks{Config: &paymentevents.SinkConfig{Sinks: []paymentevents.Sink{slow, ok}}}}}
	var busyWait time.Duration
	reconcile := func(pe *videogenv1alpha1.PaymentEvent) <-chan error {
		done := make(chan error, 1)
		go func() {
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)})
			if pe == b && busyWait == 0 {
				busyWait = res.RequeueAfter
			}
			done <- err
		}()
		return done
	}

	doneA := reconcile(a) // worker 1
	<-arrived             // A's attempt is in flight at the hanging sink
	select {
	case <-arrived:
		t.Fatalf("a second attempt reached the hanging sink %s: one more delivery worker is held", slow.Name)
	case err := <-reconcile(b): // worker 2
		if err != nil {
			t.Fatalf("event B: %v", err)
		}
	}
	if busyWait < time.Second || busyWait > 2*time.Second {
		t.Fatalf("event B, its sink busy: requeued after %v, want 1-2s", busyWait)
	}
	if err := <-reconcile(h); err != nil || okHits() != 1 {
		t.Fatalf("event H: %v, the healthy sink hit %d time(s)", err, okHits())
	}
	got := &videogenv1alpha1.PaymentEvent{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	if row := got.Status.Sinks[0]; row.State != videogenv1alpha1.DeliveryPending || row.Attempts != 0 {
		t.Fatalf("event B's row %+v; a row left for a busy sink must stay as it was", row)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(h), got); err != nil {
		t.Fatal(err)
	}
	if row := got.Status.Sinks[0]; row.State != videogenv1alpha1.DeliveryDelivered {
		t.Fatalf("event H's row %+v while %s hangs, want Delivered", row, slow.Name)
	}

	close(release) // the hanging sink answers (200) at last
	if err := <-doneA; err != nil {
		t.Fatalf("event A: %v", err)
	}
	if err := <-reconcile(b); err != nil { // B's requeue: the sink is free again
		t.Fatalf("event B again: %v", err)
	}
	<-arrived
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	if row := got.Status.Sinks[0]; row.State != videogenv1alpha1.DeliveryDelivered || row.Attempts != 1 {
		t.Fatalf("event B's row %+v after the sink is free, want Delivered at attempt 1", row)
	}
	if n := deliveriesCount(t, slow.Name, "delivered"); n != 2 {
		t.Fatalf("deliveries_total{sink=%q,outcome=delivered} = %v, want 2 (A and B, once each)", slow.Name, n)
	}
}

// Checked, holds with the defaults: hanging sinks can never hold every worker, however many
// of the 16 allowed sinks hang.
func TestDefaultWorkersOutnumberEverySinksShare(t *testing.T) {
	o := PaymentEventOptions{}
	if w, per := o.workers(), o.perSink(); w <= videogenv1alpha1.PaymentEventMaxSinks*per {
		t.Fatalf("%d workers, %d in flight per sink: %d hanging sinks hold them all", w, per, videogenv1alpha1.PaymentEventMaxSinks)
	}
}

// FAILED before the fix ("deliveries_total{sink=\"adv20-flaky\",outcome=gave_up} = 0, want 1"
// and no SinkFailed Warning): adv19 made forward() read the event back after a status write
// that answered an error other than a conflict, and tell what landed. The read-back was the
// only chance: when it failed too, nothing was told, and the next reconcile finds the row
// Failed, attempts nothing and tells nothing.
//
// Interleaving (row at attempt 2 of 3, the sink answers 503): the attempt gives the row up;
// the status write lands in etcd but its answer times out (504); the read-back right after it
// times out as well. Reachable whenever the apiserver is slow enough to time out one request:
// the next one, a few milliseconds later, meets the same overload.
//
// What the operator sees: the row is Failed for good, but videogen_payment_event_deliveries_total
// has no gave_up, so the critical VideogenPaymentEventsGivenUp never fires, and no
// "Not delivered to sink" Warning is emitted: the missed payment is found only by someone who
// reads the Forwarded column.
//
// Fixed: what could not be confirmed is kept (in memory, per event) and settled at the start of
// the event's next reconcile, from a fresh read: told if the write landed, dropped if not (the
// attempt is then made again and told then).
func TestOutcomeToldWhenTheReadBackAfterALandedWriteFails(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sink, hits := scriptedSink(t, "adv20-flaky", http.StatusServiceUnavailable, http.StatusOK)
	pe := pendingEventNamed("stripe-adv20-flaky", now, sink.Name)
	pe.Status.Sinks[0].Attempts = 2

	var writes int
	failNextGet := false
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if failNextGet {
					failNextGet = false
					return apierrors.NewTimeoutError("the read-back meets the same overload", 0)
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || writes > 1 {
					return err
				}
				failNextGet = true
				return apierrors.NewTimeoutError("the write landed, its answer did not", 0)
			},
		}).Build()
	recorder := events.NewFakeRecorder(100)
	r := deliveringReconciler(c, recorder, now, 3, sink)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	if _, err := r.Reconcile(context.Background(), req); !apierrors.IsTimeout(err) {
		t.Fatalf("reconcile 1 = %v, want the write's timeout", err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile 2: %v", err)
	}
	got := &videogenv1alpha1.PaymentEvent{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if row := got.Status.Sinks[0]; row.State != videogenv1alpha1.DeliveryFailed || row.Attempts != 3 || hits() != 1 {
		t.Fatalf("row %+v after %d attempts at the sink, want Failed after one attempt", row, hits())
	}
	if n := deliveriesCount(t, sink.Name, "gave_up"); n != 1 {
		t.Fatalf("deliveries_total{sink=%q,outcome=gave_up} = %v, want 1: the row is given up", sink.Name, n)
	}
	if warnings := drainWarnings(recorder, videogenv1alpha1.ReasonSinkFailed); warnings != 1 {
		t.Fatalf("%d SinkFailed Warning events, want 1", warnings)
	}
	// A third reconcile tells nothing more.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := deliveriesCount(t, sink.Name, "gave_up"); n != 1 || len(recorder.Events) != 0 {
		t.Fatalf("told again: gave_up %v, %d more events", n, len(recorder.Events))
	}
}
