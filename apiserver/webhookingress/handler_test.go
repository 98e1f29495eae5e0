package webhookingress_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

var configured = eventservice.StaticSecrets{"stripe": {stripeSecret}}

var _ = Describe("POST /v1/webhooks/{connector}", func() {
	var in *ingress

	BeforeEach(func() {
		in = startIngress(newNamespace("payments"), configured)
	})

	It("stores a verified Stripe event as exactly one PaymentEvent and acknowledges it", func() {
		a := in.postStripe(stripeEvent("evt_one"), stripeSecret)

		Expect(a.status).To(Equal(http.StatusOK))
		Expect(a.requestID).To(HavePrefix("req_"))
		Expect(a.ack).To(Equal(webhookingress.Ack{ID: paymentevents.Name("stripe", "evt_one"),
			MerchantEventID: "evt_one", EventType: "DISPUTE_CREATED", Stored: 1}))
		events := in.paymentEvents()
		Expect(events).To(HaveLen(1))
		pe := events[0]
		Expect(pe.Name).To(Equal(a.ack.ID))
		Expect(pe.Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelPaymentConnector, "stripe"))
		Expect(pe.Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelPaymentEventType, "DISPUTE_CREATED"))
		Expect(pe.Spec.ConnectorEventType).To(Equal("charge.dispute.created"))
		Expect(pe.Spec.Dispute).NotTo(BeNil())
		Expect(pe.Spec.Dispute.DisputeID).To(Equal("dp_evt_one"))
		Expect(*pe.Spec.AmountMinor).To(Equal(int64(2000)))
		Expect(pe.Spec.Currency).To(Equal("USD"))
		Expect(pe.Spec.BodySHA256).To(HaveLen(64))
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "stripe", "outcome": "stored"})).To(Equal(1.0))
		Expect(in.counter("videogen_webhook_verified_total", map[string]string{"connector": "stripe"})).To(Equal(1.0))
	})

	It("stores ten concurrent deliveries of one event once and answers every one with 2xx", func() {
		body := stripeEvent("evt_concurrent")
		answers := make([]answer, 10)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				defer GinkgoRecover()
				answers[i] = in.postStripe(body, stripeSecret)
			})
		}
		wg.Wait()

		duplicates := 0
		for _, a := range answers {
			Expect(a.status).To(Equal(http.StatusOK))
			Expect(a.ack.ID).To(Equal(paymentevents.Name("stripe", "evt_concurrent")))
			Expect(a.ack.MerchantEventID).To(Equal("evt_concurrent"))
			if a.ack.Duplicate {
				duplicates++
			}
		}
		Expect(duplicates).To(Equal(9))
		Expect(in.paymentEvents()).To(HaveLen(1))
		Expect(in.counter("videogen_webhook_duplicates_total", map[string]string{"connector": "stripe"})).To(Equal(9.0))
	})

	It("acknowledges a later redelivery with the same body, marked duplicate, without changing the object", func() {
		body := stripeEvent("evt_again")
		first := in.postStripe(body, stripeSecret)
		stored := in.paymentEvents()[0]

		again := in.postStripe(body, stripeSecret)
		Expect(again.status).To(Equal(http.StatusOK))
		Expect(again.ack).To(Equal(webhookingress.Ack{ID: first.ack.ID, MerchantEventID: "evt_again",
			EventType: "DISPUTE_CREATED", Duplicate: true, Duplicates: 1}))
		Expect(in.paymentEvents()[0].ResourceVersion).To(Equal(stored.ResourceVersion))
	})

	It("acknowledges a redelivery whose body differs only in times and free text as a duplicate", func() {
		body := stripeEvent("evt_retimed")
		first := in.postStripe(body, stripeSecret)
		Expect(first.status).To(Equal(http.StatusOK))
		stored := in.paymentEvents()[0]

		retimed := bytes.Replace(body, []byte(`"reason": "fraudulent"`), []byte(`"reason": "general"`), 1)
		retimed = regexp.MustCompile(`"created": \d+`).ReplaceAll(retimed, []byte(`"created": 1700000000`))
		Expect(retimed).NotTo(Equal(body))
		again := in.postStripe(retimed, stripeSecret)
		Expect(again.status).To(Equal(http.StatusOK))
		Expect(again.ack.Duplicate).To(BeTrue())
		Expect(in.paymentEvents()).To(HaveLen(1))
		Expect(in.paymentEvents()[0].ResourceVersion).To(Equal(stored.ResourceVersion))
	})

	It("answers 409 conflict, not a duplicate, for a verified event whose id names a stored event with other content", func() {
		body := stripeEvent("evt_reused")
		Expect(in.postStripe(body, stripeSecret).status).To(Equal(http.StatusOK))
		stored := in.paymentEvents()[0]

		won := bytes.Replace(body, []byte(`"status": "needs_response"`), []byte(`"status": "won"`), 1)
		Expect(won).NotTo(Equal(body))
		again := in.postStripe(won, stripeSecret)
		Expect(again.status).To(Equal(http.StatusConflict))
		Expect(again.err.Code).To(Equal("conflict"))
		Expect(again.err.Message).To(ContainSubstring("evt_reused"))
		Expect(in.paymentEvents()).To(HaveLen(1))
		Expect(in.paymentEvents()[0].ResourceVersion).To(Equal(stored.ResourceVersion))
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "stripe", "outcome": "conflict"})).To(Equal(1.0))
		Expect(in.counter("videogen_webhook_duplicates_total", map[string]string{"connector": "stripe"})).To(Equal(0.0))
	})

	It("answers a bad signature with 401 invalid_signature naming the connector, and stores nothing", func() {
		a := in.postStripe(stripeEvent("evt_forged"), "whsec_not_the_secret")

		Expect(a.status).To(Equal(http.StatusUnauthorized))
		Expect(a.err.Code).To(Equal("invalid_signature"))
		Expect(a.err.Message).To(ContainSubstring("stripe"))
		Expect(a.err.Message).To(ContainSubstring("no v1 signature matches"))
		Expect(a.err.Message).To(HavePrefix("stripe webhook not authenticated: "), "the processor is told what failed, not which Go package said so")
		Expect(a.err.RequestID).To(Equal(a.requestID))
		Expect(in.paymentEvents()).To(BeEmpty())

		missing := in.post("stripe", stripeEvent("evt_unsigned"), nil)
		Expect(missing.status).To(Equal(http.StatusUnauthorized))
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "stripe", "outcome": "invalid_signature"})).To(Equal(2.0))
	})

	It("answers an unknown connector with 404 not_found", func() {
		a := in.post("paypal", []byte(`{}`), nil)

		Expect(a.status).To(Equal(http.StatusNotFound))
		Expect(a.err.Code).To(Equal("not_found"))
		Expect(a.err.Message).To(ContainSubstring(`"paypal"`))
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "unknown", "outcome": "not_found"})).To(Equal(1.0))
	})

	It("answers a signed body that is not an event with 400 invalid_request", func() {
		body := []byte(`not json at all`)
		a := in.postStripe(body, stripeSecret)

		Expect(a.status).To(Equal(http.StatusBadRequest))
		Expect(a.err.Code).To(Equal("invalid_request"))
		Expect(a.err.Message).To(HavePrefix("cannot parse the stripe webhook body"))
	})

	It("answers a body over the cap with 413 payload_too_large", func() {
		small := startIngress(in.ns, configured, func(o *webhookingress.Options) { o.MaxBodyBytes = 512 })
		body := bytes.Repeat([]byte(" "), 513)

		a := small.postStripe(body, stripeSecret)
		Expect(a.status).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(a.err.Code).To(Equal("payload_too_large"))

		// Chunked, so the length is only found out while reading.
		req, _ := http.NewRequest(http.MethodPost, small.server.URL+"/v1/webhooks/stripe", struct{ *bytes.Reader }{bytes.NewReader(body)})
		resp, err := small.server.Client().Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
	})

	It("answers the default cap of 1 MiB", func() {
		body := append(stripeEvent("evt_huge"), bytes.Repeat([]byte(" "), 1<<20)...)
		Expect(in.postStripe(body, stripeSecret).status).To(Equal(http.StatusRequestEntityTooLarge))
	})

	It("answers 503 service_unavailable when the event cannot be stored, so the processor retries", func() {
		base, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		failing := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return errors.New("etcdserver: request timed out")
			},
		})
		broken := startIngress(in.ns, configured, func(o *webhookingress.Options) { o.Client = failing })

		a := broken.postStripe(stripeEvent("evt_unstored"), stripeSecret)
		Expect(a.status).To(Equal(http.StatusServiceUnavailable))
		Expect(a.err.Code).To(Equal("service_unavailable"))
		Expect(a.err.Message).To(ContainSubstring("evt_unstored"))
		Expect(in.paymentEvents()).To(BeEmpty())

		// The retry reaches a healthy store and is acknowledged.
		Expect(in.postStripe(stripeEvent("evt_unstored"), stripeSecret).status).To(Equal(http.StatusOK))
	})

	// An existing object that cannot be read back may be another event with the same id (409),
	// so it is not acknowledged unread: 503, and the processor's retry gets the real answer
	// (see TestStoreDuplicateUnreadableIsNotAcknowledged).
	It("answers 503, not a duplicate, when an existing event cannot be read back to compare", func() {
		base, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		var gets atomic.Int32
		flaky := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
				return apierrors.NewAlreadyExists(videogenv1alpha1.GroupVersion.WithResource("paymentevents").GroupResource(), obj.GetName())
			},
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				gets.Add(1)
				return errors.New("etcdserver: request timed out")
			},
		})
		logs := gbytes.NewBuffer()
		unreadable := startIngress(in.ns, configured, func(o *webhookingress.Options) {
			o.Client = flaky
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})

		a := unreadable.postStripe(stripeEvent("evt_unreadable"), stripeSecret)
		Expect(a.status).To(Equal(http.StatusServiceUnavailable))
		Expect(a.err.Code).To(Equal("service_unavailable"))
		Expect(a.err.Message).To(ContainSubstring("evt_unreadable"))
		Expect(gets.Load()).To(Equal(int32(1)), "the duplicate is read back once")
		Expect(logs).To(gbytes.Say("duplicate payment event could not be read back"))
		Expect(unreadable.counter("videogen_webhook_requests_total", map[string]string{"connector": "stripe", "outcome": "store_failed"})).To(Equal(1.0))
		Expect(in.paymentEvents()).To(BeEmpty())
	})

	It("answers 503 when the connector's secrets cannot be read", func() {
		down := startIngress(in.ns, eventservice.SecretSourceFunc(func(string) ([][]byte, error) {
			return nil, errors.New("cache not synced")
		}))
		a := down.postStripe(stripeEvent("evt_nosecrets"), stripeSecret)
		Expect(a.status).To(Equal(http.StatusServiceUnavailable))
		Expect(a.err.Code).To(Equal("service_unavailable"))
	})

	It("answers other methods with 405 in the error shape", func() {
		resp, err := in.server.Client().Get(in.server.URL + "/v1/webhooks/stripe")
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
		Expect(resp.Header.Get("Allow")).To(Equal("POST"))
		Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
		Expect(strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_")).To(BeTrue())
	})
})
