package webhookingress_test

import (
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// stripeFundsWithdrawn is Stripe's charge.dispute.funds_withdrawn evt for a dispute in
// needs_response; pending is its pending_webhooks, which Stripe's retries change.
func stripeFundsWithdrawn(evt string, pending int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2023-10-16","created":%d,`+
		`"data":{"object":{"id":"du_adv26","object":"dispute","amount":1000,"charge":"ch_adv26","currency":"usd",`+
		`"created":1680651737,"payment_intent":"pi_adv26","reason":"general","status":"needs_response"}},`+
		`"livemode":false,"pending_webhooks":%d,"type":"charge.dispute.funds_withdrawn"}`, evt, time.Now().Unix(), pending))
}

var _ = Describe("A Stripe funds_withdrawn stored before it was mapped", func() {
	// Checked, holds (an upgrade effect internal/connectors/README.md records):
	// charge.dispute.funds_withdrawn was EVENT_TYPE_UNSUPPORTED before it was mapped and is
	// DISPUTE_CREATED now, under the same id (the event's evt_ id).
	//
	// Interleaving: (1) before the upgrade the event is stored as EVENT_TYPE_UNSUPPORTED, but its
	// 2xx is lost, so Stripe retries; (2) the ingress is upgraded; (3) a redelivery of the same
	// body is the stored event again: 200 duplicate naming the stored EVENT_TYPE_UNSUPPORTED,
	// which stays; (4) Stripe's own retries change pending_webhooks, so the body differs: it is
	// compared by content, differs in type, and is answered 409 conflict, never a 200 claiming
	// DISPUTE_CREATED was stored. A funds_withdrawn first delivered after the upgrade is stored
	// as DISPUTE_CREATED. Step (1) is what the old build stored: the event as this build reads
	// it, without its type and details (as a type Parse does not map is stored).
	It("keeps the stored EVENT_TYPE_UNSUPPORTED: the same body is a duplicate, a retried body a 409", func() {
		in := startIngress(newNamespace("payments"), configured)
		body := stripeFundsWithdrawn("evt_adv26_old", 1)

		// (1) What a build before the mapping stored for this delivery.
		ev, err := connectors.HandleWith(ctx, stripe.New(), &connectors.Request{Body: body,
			Headers: http.Header{"Stripe-Signature": {signStripe(stripeSecret, time.Now(), body)}}},
			connectors.SecretsFromStrings(stripeSecret), "", time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(ev.Type).To(Equal(connectors.DisputeCreated))
		ev.Type, ev.Dispute, ev.Complete = connectors.EventTypeUnsupported, nil, false
		Expect(k8sClient.Create(ctx, paymentevents.FromEvent(ev, in.ns, body, time.Now()))).To(Succeed())

		// (3) The same body again.
		a := in.postStripe(body, stripeSecret)
		Expect(a.status).To(Equal(http.StatusOK))
		Expect(a.ack.Duplicate).To(BeTrue())
		Expect(a.ack.EventType).To(Equal(string(connectors.EventTypeUnsupported)))

		// (4) Stripe's retry, pending_webhooks changed.
		a = in.postStripe(stripeFundsWithdrawn("evt_adv26_old", 2), stripeSecret)
		Expect(a.status).To(Equal(http.StatusConflict), "%+v", a)
		Expect(a.err.Code).To(Equal(httpjson.CodeConflict))

		stored := in.paymentEvents()
		Expect(stored).To(HaveLen(1))
		Expect(stored[0].Spec.EventType).To(Equal(string(connectors.EventTypeUnsupported)))

		// A new one is DISPUTE_CREATED.
		a = in.postStripe(stripeFundsWithdrawn("evt_adv26_new", 1), stripeSecret)
		Expect(a.status).To(Equal(http.StatusOK))
		Expect(a.ack.Duplicate).To(BeFalse())
		Expect(a.ack.EventType).To(Equal(string(connectors.DisputeCreated)))
	})
})
