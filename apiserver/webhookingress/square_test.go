package webhookingress_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// squareKey is the signature key of a Square webhook subscription.
const squareKey = "Ibxx_5AKakO-3qeNVR61Dw"

// squarePaymentUpdated is a payment.updated event with the given event_id, shaped like the
// example of https://developer.squareup.com/reference/square/webhooks/payment.updated and
// indented as Square sends it: the signature covers these exact bytes.
func squarePaymentUpdated(eventID string) []byte {
	return []byte(fmt.Sprintf(`{
  "merchant_id": "6SSW7HV8K2ST5",
  "type": "payment.updated",
  "event_id": %q,
  "created_at": "2020-11-22T21:19:00.832Z",
  "data": {
    "type": "payment",
    "id": "hYy9pRFVxpDsO1FB05SunFWUe9JZY",
    "object": {
      "payment": {
        "amount_money": {"amount": 100, "currency": "USD"},
        "approved_money": {"amount": 100, "currency": "USD"},
        "card_details": {
          "card": {"card_brand": "MASTERCARD", "last_4": "9029", "exp_month": 11, "exp_year": 2022},
          "entry_method": "KEYED",
          "status": "CAPTURED"
        },
        "created_at": "2020-11-22T21:16:51.086Z",
        "id": "hYy9pRFVxpDsO1FB05SunFWUe9JZY",
        "location_id": "S8GWD5R9QB376",
        "order_id": "03O3USaPaAaFnI6kkwB1JxGgBsUZY",
        "receipt_number": "hYy9",
        "receipt_url": "https://squareup.com/receipt/preview/hYy9pRFVxpDsO1FB05SunFWUe9JZY",
        "source_type": "CARD",
        "status": "COMPLETED",
        "total_money": {"amount": 100, "currency": "USD"},
        "updated_at": "2020-11-22T21:19:00.831Z",
        "version_token": "bhC3b8tKJvNZWHpAi6uBcEGMSR0eL4Ikb2kEqSjQbm06o"
      }
    }
  }
}`, eventID))
}

// signSquare is Square's x-square-hmacsha256-signature, built with crypto/hmac only,
// independently of the connector: base64(HMAC-SHA256(key, notification URL + body)).
func signSquare(key, notificationURL string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(notificationURL))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// startConfiguredIngress builds the ingress the way the server does (webhookingress.Setup:
// connector Secrets watched in ns, connectors configured by c) and serves it over plain HTTP.
func startConfiguredIngress(ns string, c webhookingress.Config) *ingress {
	GinkgoHelper()
	c.Namespace = ns
	specCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	reg := prometheus.NewRegistry()
	h, err := webhookingress.Setup(specCtx, cfg, k8sClient, c, reg)
	Expect(err).NotTo(HaveOccurred())
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	DeferCleanup(srv.Close)
	return &ingress{server: srv, ns: ns, registry: reg}
}

// createSquareSecret stores the subscription's signature key as the labelled connector Secret.
func createSquareSecret(ns string) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "square-webhook",
			Labels: map[string]string{connectorsecrets.LabelConnector: "square"}},
		StringData: map[string]string{connectorsecrets.KeySecret: squareKey},
	})).To(Succeed())
}

var _ = Describe("Square deliveries, signed over the notification URL", func() {
	const (
		publicHost = "payments.videogen.example"
		publicURL  = "https://" + publicHost + "/v1/webhooks/square"
	)
	var ns string

	BeforeEach(func() {
		ns = newNamespace("square")
		createSquareSecret(ns)
	})

	// expectStoredOnce checks a delivery of eventID was acknowledged and stored as one
	// PaymentEvent carrying the payment of squarePaymentUpdated.
	expectStoredOnce := func(in *ingress, a answer, eventID string) {
		GinkgoHelper()
		Expect(a.status).To(Equal(http.StatusOK), "error %+v", a.err)
		Expect(a.ack).To(Equal(webhookingress.Ack{ID: paymentevents.Name("square", eventID),
			MerchantEventID: eventID, EventType: "PAYMENT_INTENT_SUCCESS", Stored: 1}))
		events := in.paymentEvents()
		Expect(events).To(HaveLen(1))
		pe := events[0]
		Expect(pe.Name).To(Equal(a.ack.ID))
		Expect(pe.Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelPaymentConnector, "square"))
		Expect(pe.Spec.ConnectorEventType).To(Equal("payment.updated"))
		Expect(pe.Spec.Payment).NotTo(BeNil())
		Expect(pe.Spec.Payment.PaymentID).To(Equal("hYy9pRFVxpDsO1FB05SunFWUe9JZY"))
		Expect(*pe.Spec.AmountMinor).To(Equal(int64(100)))
		Expect(pe.Spec.Currency).To(Equal("USD"))
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "square", "outcome": "stored"})).To(Equal(1.0))
	}

	It("stores a delivery signed over the configured --square-notification-url, whatever URL it arrived at", func() {
		in := startConfiguredIngress(ns, webhookingress.Config{SquareNotificationURL: publicURL})
		body := squarePaymentUpdated("evt-configured-url")

		// Sent straight to the test server's own http://127.0.0.1 address, which nobody signed.
		a := in.post("square", body, http.Header{"X-Square-Hmacsha256-Signature": {signSquare(squareKey, publicURL, body)}})

		expectStoredOnce(in, a, "evt-configured-url")
	})

	It("stores a delivery behind a TLS-terminating proxy by rebuilding https://<Host>/… from X-Forwarded-Proto", func() {
		in := startConfiguredIngress(ns, webhookingress.Config{})
		body := squarePaymentUpdated("evt-behind-proxy")

		req := in.request("square", body, http.Header{
			"X-Square-Hmacsha256-Signature": {signSquare(squareKey, publicURL, body)},
			"X-Forwarded-Proto":             {"https"},
		})
		req.Host = publicHost
		a := in.send(req)

		expectStoredOnce(in, a, "evt-behind-proxy")
	})

	It("answers a delivery signed for another notification URL with 401 invalid_signature and stores nothing", func() {
		in := startConfiguredIngress(ns, webhookingress.Config{SquareNotificationURL: publicURL})
		body := squarePaymentUpdated("evt-other-url")
		otherURL := "https://" + publicHost + "/v1/webhooks/square-staging"

		a := in.post("square", body, http.Header{"X-Square-Hmacsha256-Signature": {signSquare(squareKey, otherURL, body)}})

		Expect(a.status).To(Equal(http.StatusUnauthorized))
		Expect(a.err.Code).To(Equal("invalid_signature"))
		Expect(a.err.Message).To(ContainSubstring("square"))
		Expect(a.err.Message).To(ContainSubstring(publicURL))
		Expect(in.paymentEvents()).To(BeEmpty())
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "square", "outcome": "invalid_signature"})).To(Equal(1.0))
	})

	It("answers 401 behind a proxy when the signed scheme is not the forwarded one, and stores nothing", func() {
		in := startConfiguredIngress(ns, webhookingress.Config{})
		body := squarePaymentUpdated("evt-wrong-scheme")

		// Signed over https, but the proxy reports the processor called it over http.
		req := in.request("square", body, http.Header{
			"X-Square-Hmacsha256-Signature": {signSquare(squareKey, publicURL, body)},
			"X-Forwarded-Proto":             {"http"},
		})
		req.Host = publicHost
		a := in.send(req)

		Expect(a.status).To(Equal(http.StatusUnauthorized))
		Expect(a.err.Code).To(Equal("invalid_signature"))
		Expect(a.err.Message).To(ContainSubstring("http://" + publicHost + "/v1/webhooks/square"))
		Expect(in.paymentEvents()).To(BeEmpty())
	})
})
