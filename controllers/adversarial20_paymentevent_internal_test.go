package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// adv20Event is adv19Event under another name, so that several live in one fake client.
func adv20Event(name string, now time.Time, sinks ...string) *videogenv1alpha1.PaymentEvent {
	pe := adv19Event(now, 0, sinks...)
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
func TestAdversarial20HangingSinkDoesNotHoldEveryWorker(t *testing.T) {
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
	ok, okHits := adv19Sink(t, "adv20-ok", http.StatusOK)

	a, b, h := adv20Event("stripe-adv20-a", now, slow.Name), adv20Event("stripe-adv20-b", now, slow.Name), adv20Event("stripe-adv20-h", now, ok.Name)
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
	if n := adv19Count(t, slow.Name, "delivered"); n != 2 {
		t.Fatalf("deliveries_total{sink=%q,outcome=delivered} = %v, want 2 (A and B, once each)", slow.Name, n)
	}
}

// Checked, holds with the defaults: hanging sinks can never hold every worker, however many
// of the 16 allowed sinks hang.
func TestAdversarial20DefaultWorkersOutnumberEverySinksShare(t *testing.T) {
	o := PaymentEventOptions{}
	if w, per := o.workers(), o.perSink(); w <= videogenv1alpha1.PaymentEventMaxSinks*per {
		t.Fatalf("%d workers, %d in flight per sink: %d hanging sinks hold them all", w, per, videogenv1alpha1.PaymentEventMaxSinks)
	}
}
