package webhookingress_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// adyenKey is an Adyen HMAC key as the merchant configures it: hex.
const adyenKey = "7B3F0C9A51E2D4886A1F0E3C5B7D9A2E4C6F8A0B1D3E5F7092A4C6E8F0B2D4E6"

var withAdyen = eventservice.StaticSecrets{"adyen": {adyenKey}}

// adyenItem is one NotificationRequestItem, signed with crypto/hmac only, independently of the
// connector under test: base64(HMAC-SHA256(hex key, pspReference:originalReference:
// merchantAccountCode:merchantReference:value:currency:eventCode:success)).
type adyenItem struct {
	psp, original, eventCode string
	value                    int64
}

func (it adyenItem) signed() string {
	key, err := hex.DecodeString(adyenKey)
	Expect(err).NotTo(HaveOccurred())
	value := fmt.Sprint(it.value)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{it.psp, it.original, "VideogenShop", "order-7", value, "EUR", it.eventCode, "true"}, ":")))
	signature := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return fmt.Sprintf(`{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
		`"amount":{"currency":"EUR","value":%s},"eventCode":%q,"eventDate":"2026-03-01T10:00:00+01:00",`+
		`"merchantAccountCode":"VideogenShop","merchantReference":"order-7","originalReference":%q,`+
		`"pspReference":%q,"reason":"","success":"true"}}`, signature, value, it.eventCode, it.original, it.psp)
}

// id is the item's merchant event id as the Adyen connector derives it.
func (it adyenItem) id() string { return it.psp + ":" + it.eventCode }

func (it adyenItem) name() string { return paymentevents.Name("adyen", it.id()) }

func adyenBatch(items ...adyenItem) []byte {
	signed := make([]string, len(items))
	for i, it := range items {
		signed[i] = it.signed()
	}
	return []byte(`{"live":"false","notificationItems":[` + strings.Join(signed, ",") + `]}`)
}

func (in *ingress) postAdyen(items ...adyenItem) answer {
	GinkgoHelper()
	return in.post("adyen", adyenBatch(items...), nil)
}

// byName indexes PaymentEvents by object name.
func byName(events []videogenv1alpha1.PaymentEvent) map[string]videogenv1alpha1.PaymentEvent {
	m := make(map[string]videogenv1alpha1.PaymentEvent, len(events))
	for _, pe := range events {
		m[pe.Name] = pe
	}
	return m
}

var _ = Describe("POST /v1/webhooks/adyen with a batch of items", func() {
	var (
		in                     *ingress
		authorisation, dispute adyenItem
	)

	BeforeEach(func() {
		in = startIngress(newNamespace("adyen"), withAdyen)
		authorisation = adyenItem{psp: "8815000000000001", eventCode: "AUTHORISATION", value: 2500}
		dispute = adyenItem{psp: "8815000000000002", original: "8815000000000001", eventCode: "CHARGEBACK", value: 2500}
	})

	It("stores a chargeback batched behind an item already stored, as its own DISPUTE_CREATED event", func() {
		first := in.postAdyen(authorisation)
		Expect(first.status).To(Equal(http.StatusOK))
		Expect(first.ack).To(Equal(webhookingress.Ack{ID: authorisation.name(), MerchantEventID: authorisation.id(),
			EventType: "PAYMENT_INTENT_AUTHORIZATION_SUCCESS", Stored: 1}))
		storedAuthorisation := in.paymentEvents()[0]

		batch := in.postAdyen(authorisation, dispute)
		Expect(batch.status).To(Equal(http.StatusOK))
		Expect(batch.ack).To(Equal(webhookingress.Ack{
			ID: authorisation.name(), MerchantEventID: authorisation.id(), EventType: "PAYMENT_INTENT_AUTHORIZATION_SUCCESS",
			Stored: 1, Duplicates: 1,
			Items: []webhookingress.ItemAck{
				{ID: authorisation.name(), MerchantEventID: authorisation.id(), EventType: "PAYMENT_INTENT_AUTHORIZATION_SUCCESS", Duplicate: true},
				{ID: dispute.name(), MerchantEventID: dispute.id(), EventType: "DISPUTE_CREATED"},
			},
		}))

		events := byName(in.paymentEvents())
		Expect(events).To(HaveLen(2))
		Expect(events[authorisation.name()].ResourceVersion).To(Equal(storedAuthorisation.ResourceVersion))
		chargeback := events[dispute.name()]
		Expect(chargeback.Spec.EventType).To(Equal("DISPUTE_CREATED"))
		Expect(chargeback.Spec.MerchantEventID).To(Equal(dispute.id()))
		Expect(chargeback.Spec.ConnectorEventType).To(Equal("CHARGEBACK"))
		Expect(chargeback.Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelPaymentEventType, "DISPUTE_CREATED"))
		Expect(chargeback.Spec.Dispute).NotTo(BeNil())
		Expect(chargeback.Spec.Dispute.DisputeID).To(Equal(dispute.psp))
		Expect(chargeback.Spec.Dispute.PaymentID).To(Equal(authorisation.psp))
		Expect(chargeback.Spec.Items).To(BeEmpty())
		Expect(in.counter("videogen_webhook_requests_total", map[string]string{"connector": "adyen", "outcome": "stored"})).To(Equal(2.0))

		By("redelivering the whole batch: every item is a duplicate")
		again := in.postAdyen(authorisation, dispute)
		Expect(again.status).To(Equal(http.StatusOK))
		Expect(again.ack.Duplicate).To(BeTrue())
		Expect([]int{again.ack.Stored, again.ack.Duplicates}).To(Equal([]int{0, 2}))
		Expect(in.paymentEvents()).To(HaveLen(2))
		Expect(in.counter("videogen_webhook_duplicates_total", map[string]string{"connector": "adyen"})).To(Equal(1.0))
	})

	It("stores every item of a batch of 40, past the 32 a single object could list", func() {
		items := make([]adyenItem, 40)
		for i := range items {
			items[i] = adyenItem{psp: fmt.Sprintf("88160000000000%02d", i), original: "8815000000000001", eventCode: "REFUND", value: int64(100 + i)}
		}

		a := in.postAdyen(items...)
		Expect(a.status).To(Equal(http.StatusOK))
		Expect([]int{a.ack.Stored, a.ack.Duplicates}).To(Equal([]int{40, 0}))
		Expect(a.ack.Items).To(HaveLen(40))

		events := byName(in.paymentEvents())
		Expect(events).To(HaveLen(40))
		for _, it := range items {
			pe, ok := events[it.name()]
			Expect(ok).To(BeTrue(), "no PaymentEvent for %s", it.id())
			Expect(pe.Spec.EventType).To(Equal("CHARGE_REFUNDED"))
			Expect(*pe.Spec.AmountMinor).To(Equal(it.value))
			Expect(pe.Spec.Items).To(BeEmpty())
			Expect(pe.Spec.ItemsOmitted).To(BeZero())
		}
	})

	It("answers 503 when one item cannot be stored, and completes the batch on the retry", func() {
		base, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		failDispute := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetName() == dispute.name() {
					return errors.New("etcdserver: request timed out")
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		broken := startIngress(in.ns, withAdyen, func(o *webhookingress.Options) { o.Client = failDispute })

		a := broken.postAdyen(authorisation, dispute)
		Expect(a.status).To(Equal(http.StatusServiceUnavailable))
		Expect(a.err.Code).To(Equal("service_unavailable"))
		Expect(a.err.Message).To(ContainSubstring("1 of the 2 adyen events"))
		Expect(a.err.Message).To(ContainSubstring(dispute.id()))
		Expect(in.paymentEvents()).To(HaveLen(1))

		retry := in.postAdyen(authorisation, dispute)
		Expect(retry.status).To(Equal(http.StatusOK))
		Expect([]int{retry.ack.Stored, retry.ack.Duplicates}).To(Equal([]int{1, 1}))
		Expect(byName(in.paymentEvents())).To(HaveKey(dispute.name()))
	})
})
