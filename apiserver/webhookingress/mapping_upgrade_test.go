package webhookingress_test

// The upgrade effect of a connector mapping change.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// Checked, holds (an upgrade effect internal/connectors/README.md records): Adyen's
// REQUEST_FOR_INFORMATION Expired was DISPUTE_CREATED before the mapping changed and is DISPUTE_CLOSED now,
// under the same id (ADV22BDISPUTE001:REQUEST_FOR_INFORMATION:Expired, the dispute status being part of the id).
//
// Interleaving: (1) before the upgrade the item is stored as DISPUTE_CREATED, but its 2xx is
// lost (a timeout), so Adyen retries; (2) the ingress is upgraded; (3) Adyen's retry resends the
// same body: the body hash is the stored one's, so it is the stored event again, 200 duplicate,
// and the stored DISPUTE_CREATED stays (nothing is stored twice); (4) the same item resent
// inside another batch (Adyen batches; a resend from the Customer Area) has another body, is
// compared by content, differs in type, and is answered 409 conflict (the batch's other item is
// still stored), never a 200 that would claim the new type was stored. Step (1) is simulated by
// rewriting the stored object's type to the old mapping (what the old build stored).
func TestAdyenRFIExpiredStoredUnderTheOldMappingMeetsItsRedelivery(t *testing.T) {
	now := time.Unix(1767225600, 0)
	svc, err := eventservice.New(eventservice.StaticSecrets{"adyen": {adyenHMACKey}},
		eventservice.WithClock(clocktesting.NewFakePassiveClock(now)))
	if err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	post := adyenPoster(t, svc, cl)
	expired := adyenDisputeItem(t, "REQUEST_FOR_INFORMATION", "Expired")
	if code, out := post(expired); code != http.StatusOK || !strings.Contains(out, `"event_type":"DISPUTE_CLOSED"`) {
		t.Fatalf("RFI Expired: %d %s, want 200 stored DISPUTE_CLOSED", code, out)
	}
	// (1) What a build before the mapping stored for this delivery.
	var list videogenv1alpha1.PaymentEventList
	if err := cl.List(context.Background(), &list, client.InNamespace("payments")); err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %d objects", err, len(list.Items))
	}
	old := list.Items[0].DeepCopy()
	old.Spec.EventType = "DISPUTE_CREATED"
	if err := cl.Update(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	// (3) The retry of the same body is the stored event again.
	if code, out := post(expired); code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) ||
		!strings.Contains(out, `"event_type":"DISPUTE_CREATED"`) {
		t.Fatalf("retry of the same body: %d %s, want 200 duplicate naming the stored DISPUTE_CREATED", code, out)
	}
	// (4) The same item in another batch: a conflict, and the other item is stored.
	chargeback := adyenDisputeItem(t, "NOTIFICATION_OF_CHARGEBACK", "Undefended")
	if code, out := post(expired, chargeback); code != http.StatusConflict || !strings.Contains(out, "REQUEST_FOR_INFORMATION:Expired") {
		t.Fatalf("the item inside another batch: %d %s, want 409 naming it", code, out)
	}
	if err := cl.List(context.Background(), &list, client.InNamespace("payments")); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, pe := range list.Items {
		types[pe.Spec.MerchantEventID] = pe.Spec.EventType
	}
	if len(types) != 2 || types["ADV22BDISPUTE001:REQUEST_FOR_INFORMATION:Expired"] != "DISPUTE_CREATED" ||
		types["ADV22BDISPUTE001:NOTIFICATION_OF_CHARGEBACK:Undefended"] != "DISPUTE_CREATED" {
		t.Fatalf("stored %v, want the old RFI object unchanged and the chargeback notice stored", types)
	}
}
