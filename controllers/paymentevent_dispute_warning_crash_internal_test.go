package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// crashAfterWrite is what the "process" dies with in TestCrashAfterDisputeRecordedStillWarns.
type crashAfterWrite struct{}

// A crash between the status write that records a dispute's
// opening and the Warning that tells it loses the only Warning.
//
// Interleaving (one Stripe charge.dispute.created, DISPUTE_CREATED):
//  1. The manager reconciles the new PaymentEvent; its Processed status write lands.
//  2. The manager dies before the next statement, the Eventf of "Warning DisputeCreated" (OOM
//     kill, node drain, a leader-election loss that exits the process, a panic elsewhere).
//  3. The new leader reconciles the event: it is Processed, so nothing is told again.
//
// Every step is reachable: the window is one statement wide, but the manager runs for months
// and is restarted on every upgrade and failover; the Warning is the only thing that tells an
// operator a dispute was opened and its evidence deadline is running (sinks may filter it
// out). What a user saw before: `kubectl get events` never shows the dispute; nobody answers
// it and it is lost by default.
//
// FAILED before the fix ("0 DisputeCreated Warning events, want 1"). Fixed: the write that
// records a DISPUTE_CREATED marks the Warning owed (Processed reason DisputeWarningOwed); the
// Warning is emitted after it and the mark cleared (reason Recorded) by a second write, so a
// crash in between emits it on the next reconcile (at worst twice, a crash between the Warning
// and the clearing write; never neither).
func TestCrashAfterDisputeRecordedStillWarns(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	pe := pendingEvent(now, 0)
	pe.Name, pe.Status = "stripe-adv25-crash", videogenv1alpha1.PaymentEventStatus{}
	pe.Spec.MerchantEventID = "evt_adv25_crash"
	pe.Spec.Dispute = &videogenv1alpha1.PaymentEventDetails{DisputeID: "dp_adv25", PaymentID: "pi_adv25", Reason: "fraudulent"}
	pe.Labels = paymentevents.Labels(pe.Spec.Connector, pe.Spec.EventType)

	crash := true
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if crash && err == nil {
					crash = false
					panic(crashAfterWrite{}) // the write landed; the process dies before it hears back
				}
				return err
			},
		}).Build()
	newManager := func() (*PaymentEventReconciler, *events.FakeRecorder) {
		recorder := events.NewFakeRecorder(100)
		return deliveringReconciler(c, recorder, now, 0), recorder
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	first, firstEvents := newManager()
	func() {
		defer func() {
			if p := recover(); p != (crashAfterWrite{}) {
				panic(p)
			}
		}()
		_, _ = first.Reconcile(context.Background(), req)
		t.Fatal("the first manager did not die after its status write: the interleaving was not reached")
	}()
	stored := &videogenv1alpha1.PaymentEvent{}
	if err := c.Get(context.Background(), req.NamespacedName, stored); err != nil || !processed(stored) {
		t.Fatalf("after the crash: %v, processed %v; want the recording write landed", err, processed(stored))
	}

	second, secondEvents := newManager() // the new leader, nothing in memory
	if _, err := second.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile by the new leader: %v", err)
	}
	if _, err := second.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile again: %v", err)
	}
	warnings := 0
	for _, rec := range []*events.FakeRecorder{firstEvents, secondEvents} {
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.HasPrefix(e, "Warning "+videogenv1alpha1.ReasonDisputeCreated) {
				warnings++
			}
		}
	}
	if warnings != 1 {
		t.Fatalf("%d DisputeCreated Warning events, want 1", warnings)
	}
	if err := c.Get(context.Background(), req.NamespacedName, stored); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(stored.Status.Conditions, videogenv1alpha1.ConditionProcessed); cond == nil ||
		cond.Reason != videogenv1alpha1.ReasonEventRecorded {
		t.Fatalf("Processed condition %+v; want reason %s once the Warning is told", cond, videogenv1alpha1.ReasonEventRecorded)
	}
}

// The Warning owed by a
// recorded dispute opening is told once even when the reconcile after the one that told it reads
// a cache that has not seen the clearing write yet.
//
// Interleaving: reconcile 1 records the opening (write 1, reason DisputeWarningOwed), emits the
// Warning and clears the mark (write 2, reason Recorded). Write 1's watch event requeues the
// event; reconcile 2 reads it from an informer cache that has write 1 but not yet write 2 (the
// cache is fed by the same watch, in order, and lags under load): it still says owed. Reachable
// on every dispute opening: the requeue from write 1's own watch event is certain, the lag is
// the informer's ordinary one. With the mark read from the cache alone, reconcile 2 emitted the
// Warning a second time (its clearing write then met a conflict): two pages for one dispute.
// Now the mark is read again from the API server (APIReader) before the Warning is emitted.
func TestOwedWarningToldOnceDespiteLaggingCache(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	pe := pendingEvent(now, 0)
	pe.Name, pe.Status = "stripe-adv25-lag", videogenv1alpha1.PaymentEventStatus{}
	pe.Spec.MerchantEventID = "evt_adv25_lag"
	pe.Spec.Dispute = &videogenv1alpha1.PaymentEventDetails{DisputeID: "dp_adv25_lag", PaymentID: "pi_adv25_lag"}
	pe.Labels = paymentevents.Labels(pe.Spec.Connector, pe.Spec.EventType)

	var afterFirstWrite *videogenv1alpha1.PaymentEvent
	lagging := false
	apiServer := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pe).WithStatusSubresource(pe).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if err == nil && afterFirstWrite == nil {
					afterFirstWrite = obj.(*videogenv1alpha1.PaymentEvent).DeepCopy()
				}
				return err
			},
		}).Build()
	cache := interceptor.NewClient(apiServer.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if lagging && key.Name == pe.Name {
				afterFirstWrite.DeepCopyInto(obj.(*videogenv1alpha1.PaymentEvent))
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	recorder := events.NewFakeRecorder(100)
	r := &PaymentEventReconciler{Client: cache, APIReader: apiServer, Recorder: recorder,
		Clock: clocktesting.NewFakePassiveClock(now), Jitter: func() float64 { return 0 },
		Options: PaymentEventOptions{HTTPClient: paymentevents.NewHTTPClient(), Sinks: paymentevents.StaticSinks{}}}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile 1: %v", err)
	}
	if afterFirstWrite == nil || !disputeWarningOwed(afterFirstWrite) {
		t.Fatal("the recording write did not mark the Warning owed: the interleaving was not reached")
	}
	lagging = true
	_, _ = r.Reconcile(context.Background(), req) // a conflict, if any, is requeued
	lagging = false
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile 3: %v", err)
	}
	if warnings := drainWarnings(recorder, videogenv1alpha1.ReasonDisputeCreated); warnings != 1 {
		t.Fatalf("%d DisputeCreated Warning events, want 1", warnings)
	}
}

// The chargeback
// of a Square inquiry warns, though the inquiry's DISPUTE_CREATED warned before under the same
// dispute id.
//
// Interleaving: Square sends dispute.created (state INQUIRY_EVIDENCE_REQUIRED: an inquiry, no
// funds moved), recorded and warned about; days later the inquiry escalates on the same Dispute
// object, dispute.state.updated EVIDENCE_REQUIRED, now DISPUTE_CREATED too (see
// the square connector's TestSquareInquiryEscalatedToChargebackIsADisputeOpened). Before the fix the controller counted only Adyen's
// REQUEST_FOR_INFORMATION as an inquiry, so the chargeback (the money taken back, a new
// deadline) found an opening of its dispute recorded before and got its Normal event only: the
// on-call, paged once for an inquiry, never heard that it had become a chargeback. Square's
// inquiry states (INQUIRY_*) now count as inquiries, as Adyen's RFI does.
func TestSquareChargebackAfterInquiryWarnsAgain(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	opening := func(name, eventType, state string, recorded time.Time) *videogenv1alpha1.PaymentEvent {
		pe := pendingEvent(recorded, 0)
		pe.Name, pe.Status = name, videogenv1alpha1.PaymentEventStatus{}
		pe.Spec.Connector, pe.Spec.ConnectorEventType, pe.Spec.MerchantEventID = "square", eventType, name
		pe.Spec.Dispute = &videogenv1alpha1.PaymentEventDetails{DisputeID: "XDgyFu7yo1E2S5lQGGpYn",
			PaymentID: "fbmsaEOpoARDKxiSGH1fqPuqoqFZY", Status: state, Reason: "AMOUNT_DIFFERS"}
		pe.Labels = paymentevents.Labels(pe.Spec.Connector, pe.Spec.EventType)
		return pe
	}
	inquiry := opening("square-adv25-a-inquiry", "dispute.created", "INQUIRY_EVIDENCE_REQUIRED", now)
	chargeback := opening("square-adv25-b-chargeback", "dispute.state.updated", "EVIDENCE_REQUIRED", now)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(inquiry, chargeback).WithStatusSubresource(inquiry, chargeback).Build()
	// Recorded in order (days apart in production; here within one second, so the names, a then
	// b, order them as recordedBefore does).
	clk := clocktesting.NewFakePassiveClock(now)
	recorder := events.NewFakeRecorder(100)
	r := &PaymentEventReconciler{Client: c, APIReader: c, Recorder: recorder, Clock: clk, Jitter: func() float64 { return 0 },
		Options: PaymentEventOptions{HTTPClient: paymentevents.NewHTTPClient(), Sinks: paymentevents.StaticSinks{}}}
	warnings := func(pe *videogenv1alpha1.PaymentEvent) int {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)}); err != nil {
			t.Fatalf("reconcile %s: %v", pe.Name, err)
		}
		n := 0
		for len(recorder.Events) > 0 {
			if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+videogenv1alpha1.ReasonDisputeCreated) {
				n++
			}
		}
		return n
	}
	if n := warnings(inquiry); n != 1 {
		t.Fatalf("the inquiry gave %d DisputeCreated Warning events, want 1", n)
	}
	if n := warnings(chargeback); n != 1 {
		t.Fatalf("the chargeback that followed the inquiry gave %d DisputeCreated Warning events, want 1", n)
	}
}
