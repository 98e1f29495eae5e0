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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// scriptedSink is a sink answering a scripted status per attempt (the last one repeats).
func scriptedSink(t *testing.T, name string, statuses ...int) (paymentevents.Sink, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		code := statuses[min(n, len(statuses))-1]
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return paymentevents.Sink{Name: name, URL: srv.URL, Secret: standardwebhooks.NewSecret(), Timeout: metav1.Duration{Duration: 5 * time.Second}},
		func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// deliveriesCount reads videogen_payment_event_deliveries_total{sink, outcome}.
func deliveriesCount(t *testing.T, sink, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	if err := paymentEventDeliveries.WithLabelValues(sink, outcome).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pendingEvent is a recorded PaymentEvent with one row per sink, each pending and due, with
// attempts already made.
func pendingEvent(now time.Time, attempts int32, sinks ...string) *videogenv1alpha1.PaymentEvent {
	pe := &videogenv1alpha1.PaymentEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: "stripe-adv19", Generation: 1},
		Spec: videogenv1alpha1.PaymentEventSpec{Connector: "stripe", MerchantEventID: "evt_adv19", EventType: "DISPUTE_CREATED",
			ReceivedAt: metav1.NewTime(now), BodySHA256: "0000000000000000000000000000000000000000000000000000000000000000"},
	}
	due := metav1.NewTime(now.Add(-time.Second))
	for _, s := range sinks {
		pe.Status.Sinks = append(pe.Status.Sinks, videogenv1alpha1.SinkDelivery{
			Name: s, WebhookID: paymentevents.WebhookID(pe.Name, s), State: videogenv1alpha1.DeliveryPending,
			DeliveryAttempts: videogenv1alpha1.DeliveryAttempts{Attempts: attempts, NextAttemptAt: &due},
		})
	}
	meta.SetStatusCondition(&pe.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionProcessed,
		Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: videogenv1alpha1.ReasonEventRecorded, Message: "recorded"})
	pe.Status.ObservedGeneration = 1
	return pe
}

// FAILED before the fix (gave_up counted 1 for a delivery that is Delivered): the
// videogen_payment_event_deliveries_total outcomes were counted when an attempt ended, before
// the status write that records them. When that write did not land, the next reconcile makes
// the attempt again and may reach another end; the counter keeps both.
//
// Interleaving (one event, sink "adv19-billing", maxAttempts 3):
//  1. The row has had 2 failed attempts and is due. A reconcile reads the event (APIReader),
//     makes attempt 3: the sink answers 503, so the row is given up in memory and gave_up is
//     counted.
//  2. The status write meets a newer copy (409 Conflict): during the attempt, which may last
//     up to the sink's timeout (1m), the object changed. Reachable: an on-call annotating or
//     labelling PaymentEvents (`kubectl annotate ... videogen.dev/redeliver`, the runbook's
//     own step, on another of the event's rows), or, on a failover, the other manager's write
//     of the same row. A write that fails without landing (apiserver timeout, 5xx) does the
//     same.
//  3. requeueOnConflict retries at once from the server's copy: the row is still Pending with
//     2 attempts, so attempt 3 is made again; the sink, recovered, answers 200: Delivered.
//
// What the operator sees: the critical alert VideogenPaymentEventsGivenUp ("that sink missed
// those payments") fires for sink adv19-billing, while every PaymentEvent shows it Delivered;
// `kubectl get paymentevents -o wide` lists no DeliveryFailed to redeliver. The counters must
// count what the status records, once, as the Kubernetes events already do.
func TestDeliveryOutcomeCountedOnlyOnceRecorded(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sink, hits := scriptedSink(t, "adv19-billing", http.StatusServiceUnavailable, http.StatusOK)
	pe := pendingEvent(now, 2, sink.Name)

	var conflicts int
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if conflicts == 0 {
					conflicts++
					return apierrors.NewConflict(schema.GroupResource{Group: "videogen.dev", Resource: "paymentevents"}, obj.GetName(), nil)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	r := deliveringReconciler(c, events.NewFakeRecorder(100), now, 3, sink)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}
	gaveUp := func() float64 { return deliveriesCount(t, sink.Name, "gave_up") }
	delivered := func() float64 { return deliveriesCount(t, sink.Name, "delivered") }

	if res, err := r.Reconcile(context.Background(), req); err != nil || res.RequeueAfter != conflictRetry {
		t.Fatalf("reconcile 1 (its write conflicts) = %+v, %v", res, err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile 2: %v", err)
	}
	got := &videogenv1alpha1.PaymentEvent{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if row := got.Status.Sinks[0]; row.State != videogenv1alpha1.DeliveryDelivered || row.Attempts != 3 || hits() != 2 {
		t.Fatalf("row %+v after %d attempts at the sink, want Delivered at attempt 3", row, hits())
	}
	if gaveUp() != 0 || delivered() != 1 {
		t.Fatalf("deliveries_total{sink=%q}: gave_up %v, delivered %v; the status says Delivered once, never given up",
			sink.Name, gaveUp(), delivered())
	}
}

// FAILED before the fix ("0 SinkFailed Warning events, want 1"; and, with outcomes counted only
// after a successful write, also "gave_up = 0"): a status write that lands but reports an
// error (a client-side timeout while etcd commits) is not made again, so the Warning event
// "Not delivered to sink …" and the outcome count of its rows were never told: the row is
// Failed for good and nobody is told but the Forwarded condition. The fix reads the event back
// after a write error other than a conflict and tells what landed.
//
// Interleaving: the row's last attempt (3 of 3) is answered 503, the row is given up; the
// status write lands and answers 504 Timeout; the next reconcile reads the stored Failed row
// and attempts nothing. Checked, holds as well: the sink is not sent the event again, and the
// row is not recorded as delivered.
func TestGiveUpWhoseWriteLandsButErrsIsCounted(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sink, hits := scriptedSink(t, "adv19-ledger", http.StatusServiceUnavailable, http.StatusOK)
	pe := pendingEvent(now, 2, sink.Name)
	pe.Name = "stripe-adv19-landed"
	pe.Status.Sinks[0].WebhookID = paymentevents.WebhookID(pe.Name, sink.Name)

	var writes int
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || writes > 1 {
					return err
				}
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
}

// FAILED before the fix ("0 DisputeCreated Warning events, want 1"): record() emits the
// event's Kubernetes events (PaymentEventReceived, and the Warning DisputeCreated that tells
// the operators a dispute was opened, with its deadline running) only after a status write
// that answered OK. A write that lands but answers an error (a timeout while etcd commits) left
// the event Processed, so no later reconcile recorded it again: the dispute's Warning was never
// emitted and videogen_payment_events_processed_total never counted it.
//
// Interleaving: a new DISPUTE_CREATED event; the Processed status write lands and answers 504;
// the reconcile retried (rate-limited) reads it Processed and only forwards.
func TestDisputeRecordedByAWriteThatErrsIsTold(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	pe := pendingEvent(now, 0)
	pe.Name = "stripe-adv19-dispute"
	pe.Status = videogenv1alpha1.PaymentEventStatus{}
	pe.Spec.Dispute = &videogenv1alpha1.PaymentEventDetails{DisputeID: "dp_adv19", PaymentID: "pi_adv19", Reason: "fraudulent"}

	var writes int
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil || writes > 1 {
					return err
				}
				return apierrors.NewTimeoutError("the write landed, its answer did not", 0)
			},
		}).Build()
	recorder := events.NewFakeRecorder(100)
	r := deliveringReconciler(c, recorder, now, 0)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	if _, err := r.Reconcile(context.Background(), req); !apierrors.IsTimeout(err) {
		t.Fatalf("reconcile 1 = %v, want the write's timeout", err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile 2: %v", err)
	}
	if disputes := drainWarnings(recorder, videogenv1alpha1.ReasonDisputeCreated); disputes != 1 {
		t.Fatalf("%d DisputeCreated Warning events, want 1", disputes)
	}
}

// Checked, holds: a PaymentEvent deleted by hand while its delivery is in flight is neither
// re-created nor retried. The attempt is made (the sink has it), the status write answers 404
// (one "Reconciler error" line), and the retried reconcile finds nothing and stops.
func TestEventDeletedMidDeliveryStops(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	sink, hits := scriptedSink(t, "adv19-deleted", http.StatusOK)
	pe := pendingEvent(now, 0, sink.Name)
	pe.Name = "stripe-adv19-deleted"

	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				// kubectl delete lands while the attempt is in flight.
				if err := c.Delete(ctx, obj.DeepCopyObject().(client.Object)); client.IgnoreNotFound(err) != nil {
					return err
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	r := deliveringReconciler(c, events.NewFakeRecorder(100), now, 0, sink)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	if _, err := r.Reconcile(context.Background(), req); !apierrors.IsNotFound(err) {
		t.Fatalf("reconcile 1 = %v, want the write's 404", err)
	}
	if res, err := r.Reconcile(context.Background(), req); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("reconcile 2 = %+v, %v; want nothing more", res, err)
	}
	if err := c.Get(context.Background(), req.NamespacedName, &videogenv1alpha1.PaymentEvent{}); !apierrors.IsNotFound(err) || hits() != 1 {
		t.Fatalf("get after delete: %v; sink hit %d time(s), want 1", err, hits())
	}
}

// deliveringReconciler is a PaymentEventReconciler on c at now, without jitter, delivering to
// sinks (none: no sink config) with maxAttempts attempts (0: the default).
func deliveringReconciler(c client.Client, recorder events.EventRecorder, now time.Time, maxAttempts int32, sinks ...paymentevents.Sink) *PaymentEventReconciler {
	var config *paymentevents.SinkConfig
	if len(sinks) > 0 {
		config = &paymentevents.SinkConfig{Sinks: sinks, Retry: paymentevents.RetryPolicy{MaxAttempts: maxAttempts}}
	}
	return &PaymentEventReconciler{Client: c, APIReader: c, Recorder: recorder,
		Clock: clocktesting.NewFakePassiveClock(now), Jitter: func() float64 { return 0 },
		Options: PaymentEventOptions{HTTPClient: paymentevents.NewHTTPClient(), Sinks: paymentevents.StaticSinks{Config: config}}}
}

// drainWarnings takes every event recorder holds and counts the Warnings of reason.
func drainWarnings(recorder *events.FakeRecorder, reason string) int {
	n := 0
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+reason) {
			n++
		}
	}
	return n
}
