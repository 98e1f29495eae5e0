package webhookingress_test

// The webhook ingress on a fake client.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// adyenAuthorisation is one signed AUTHORISATION NotificationRequestItem (success=true) for
// psp over value minor units, signed with adyenKey by crypto/hmac only.
func adyenAuthorisation(t *testing.T, psp string, value int64) string {
	t.Helper()
	key, err := hex.DecodeString(adyenKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{psp, "", "VideogenShop", "order-20", fmt.Sprint(value), "EUR", "AUTHORISATION", "true"}, ":")))
	return fmt.Sprintf(`{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
		`"amount":{"currency":"EUR","value":%d},"eventCode":"AUTHORISATION","eventDate":"2026-03-01T10:00:00+01:00",`+
		`"merchantAccountCode":"VideogenShop","merchantReference":"order-20","originalReference":"",`+
		`"pspReference":%q,"reason":"","success":"true"}}`, base64.StdEncoding.EncodeToString(mac.Sum(nil)), value, psp)
}

// What breaks: two verified items of one Adyen batch whose ids collide (the same
// pspReference:eventCode) but that say different things (4200 and 9900 EUR cents) are answered
// 200 {"stored":1,"duplicates":1}: the second is acknowledged as a redelivery of the first and
// thrown away. The same two events in two deliveries are 409 conflict (the ingress's documented
// answer for "the id the connector derived names two different events", store's comment): the
// processor retries and the conflict outcome and log say which event. In one batch, sameEvent's
// shortcut "same body hash, same event" holds for every pair of items, since an item's
// PaymentEvent carries the hash of the whole batch's body.
//
// Input: one signed Adyen delivery with two such items (the collision store() exists to catch:
// an id scheme that leaves out part of what makes an event, as psp:eventCode once left out
// success). Creates run in either order; the answer is the same.
//
// What the user sees: Adyen marks the batch delivered; the 9900 authorisation exists nowhere
// (no PaymentEvent, no sink, no conflict metric, no log line).
func TestTwoDifferentItemsOfOneBatchWithOneIDAreAConflictNotADuplicate(t *testing.T) {
	const ns, psp = "payments", "8815000000002020"
	cl := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	svc, err := eventservice.New(withAdyen)
	if err != nil {
		t.Fatal(err)
	}
	h, err := webhookingress.New(webhookingress.Options{Service: svc, Client: cl, Namespace: ns,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)

	batch := []byte(`{"live":"false","notificationItems":[` + adyenAuthorisation(t, psp, 4200) + `,` +
		adyenAuthorisation(t, psp, 9900) + `]}`)
	status, body := postTo(t, mux, "adyen", batch)

	var stored videogenv1alpha1.PaymentEventList
	if err := cl.List(context.Background(), &stored, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	amounts := []int64{}
	for _, pe := range stored.Items {
		if pe.Spec.AmountMinor != nil {
			amounts = append(amounts, *pe.Spec.AmountMinor)
		}
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	if status != http.StatusConflict || e.Error.Code != "conflict" {
		t.Fatalf("answered %d %s with PaymentEvents of amounts %v: one of the two authorisations is acknowledged but stored nowhere; want 409 conflict, as for the same two events in two deliveries",
			status, body, amounts)
	}

	// A true redelivery of a batch (the same item twice, or the batch again) stays a duplicate.
	same := []byte(`{"live":"false","notificationItems":[` + adyenAuthorisation(t, "8815000000002021", 4200) + `,` +
		adyenAuthorisation(t, "8815000000002021", 4200) + `]}`)
	for range 2 {
		if status, body := postTo(t, mux, "adyen", same); status != http.StatusOK {
			t.Fatalf("a batch holding one item twice: %d %s, want 200", status, body)
		}
	}
}
