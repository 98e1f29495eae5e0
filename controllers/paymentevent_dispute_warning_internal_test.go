package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// Of several openings of
// one dispute, the one recorded first warns, even when its telling waits for a later reconcile.
//
// FAILED with the change's first version ("0 DisputeCreated Warning events, want 1"): an opening
// counted any other recorded opening of its dispute as "warned already".
//
// Interleaving (Adyen NOTIFICATION_OF_CHARGEBACK "a", CHARGEBACK "b", same pspReference):
//  1. a's Processed status write lands and answers 504 (a timeout while etcd commits); its
//     read-back fails too, so what to tell is kept for a's next reconcile (TestDisputeRecordedByAWriteThatErrsIsTold).
//  2. b is reconciled (its delivery came in meanwhile): it finds a recorded and, rightly, gives
//     no Warning of its own.
//  3. a's next reconcile reads a back and tells it: it found b recorded and gave no Warning
//     either. Nobody was ever told the dispute was opened.
//
// Every step is reachable: timeouts on status writes under etcd load are what TestDisputeRecordedByAWriteThatErrsIsTold pins,
// the read-back failing with it is the same outage, and Adyen sends the NoC and the CHARGEBACK
// within minutes ("or sometimes on the same day"). Now an opening counts only those recorded
// before it (by the Processed condition's time, then by name within one second), so the first
// one always warns.
func TestFirstOpeningWarnsWhenItsTellingWaits(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	opening := func(name, code string) *videogenv1alpha1.PaymentEvent {
		pe := pendingEvent(now, 0)
		pe.Name, pe.Status = name, videogenv1alpha1.PaymentEventStatus{}
		pe.Spec.Connector, pe.Spec.ConnectorEventType, pe.Spec.MerchantEventID = "adyen", code, "ADV24CDSP0000001:"+code
		pe.Spec.Dispute = &videogenv1alpha1.PaymentEventDetails{DisputeID: "ADV24CDSP0000001", PaymentID: "JVBXGSDM53RZNN82"}
		pe.Labels = paymentevents.Labels(pe.Spec.Connector, pe.Spec.EventType)
		return pe
	}
	a, b := opening("adyen-adv24c-a", "NOTIFICATION_OF_CHARGEBACK"), opening("adyen-adv24c-b", "CHARGEBACK")

	var aWrites int
	var aUnreadable bool
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(a, b).WithStatusSubresource(a, b).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				err := c.SubResource(sub).Update(ctx, obj, opts...)
				if obj.GetName() == a.Name {
					if aWrites++; aWrites == 1 && err == nil {
						aUnreadable = true
						return apierrors.NewTimeoutError("the write landed, its answer did not", 0)
					}
				}
				return err
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if key.Name == a.Name && aUnreadable { // the read-back right after the write
					return apierrors.NewServiceUnavailable("etcd is slow")
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	recorder := events.NewFakeRecorder(100)
	r := deliveringReconciler(c, recorder, now, 0)
	reconcile := func(pe *videogenv1alpha1.PaymentEvent) error {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pe)})
		return err
	}

	if err := reconcile(a); !apierrors.IsTimeout(err) {
		t.Fatalf("reconcile a = %v, want the write's timeout", err)
	}
	aUnreadable = false
	if _, pending := r.unconfirmed.Load(client.ObjectKeyFromObject(a)); !pending {
		t.Fatal("a's telling is not waiting for its next reconcile: the interleaving was not reached")
	}
	if err := reconcile(b); err != nil {
		t.Fatalf("reconcile b: %v", err)
	}
	if err := reconcile(a); err != nil {
		t.Fatalf("reconcile a again: %v", err)
	}
	warned := map[string]int{}
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.HasPrefix(e, "Warning "+videogenv1alpha1.ReasonDisputeCreated) {
			warned[e]++
		}
	}
	if len(warned) != 1 {
		t.Fatalf("%d DisputeCreated Warning events, want 1: %v", len(warned), warned)
	}
}
