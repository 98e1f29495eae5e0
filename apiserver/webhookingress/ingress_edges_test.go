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
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
)

// adyenOutcome is one Adyen NotificationRequestItem whose `success` (and the refusal `reason`
// that goes with success=false) is chosen by the test; signed with crypto/hmac only, as
// adyenItem is, over pspReference:originalReference:merchantAccountCode:merchantReference:
// value:currency:eventCode:success. `success` is one of the signed fields.
type adyenOutcome struct {
	psp, eventCode, success, reason string
	value                           int64
}

func (it adyenOutcome) body() []byte {
	key, err := hex.DecodeString(adyenKey)
	Expect(err).NotTo(HaveOccurred())
	value := fmt.Sprint(it.value)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(strings.Join([]string{it.psp, "", "VideogenShop", "order-9", value, "EUR", it.eventCode, it.success}, ":")))
	signature := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return []byte(fmt.Sprintf(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},`+
		`"amount":{"currency":"EUR","value":%s},"eventCode":%q,"eventDate":"2026-03-01T10:00:00+01:00",`+
		`"merchantAccountCode":"VideogenShop","merchantReference":"order-9","originalReference":"",`+
		`"pspReference":%q,"reason":%q,"success":%q}}]}`, signature, value, it.eventCode, it.psp, it.reason, it.success))
}

var _ = Describe("Webhook ingress", func() {
	// FAILS (a 2xx for an event that is not stored; the event is lost).
	//
	// What breaks: the Adyen connector keys an item by pspReference + ":" + eventCode
	// (internal/connectors/adyen/parse.go) and the ingress answers AlreadyExists with 200
	// "duplicate" without looking at what is stored (handler.go store). Adyen can send the
	// SAME pspReference and eventCode again with a different, signed `success` when the outcome
	// of that event changes (as we read Adyen's "Handle webhook events" guide,
	// docs.adyen.com/development-resources/webhooks/handle-webhook-events: a later message for
	// the same eventCode+pspReference whose `success` went from false to true is the outcome to
	// act on, not a repeat; the page could not be quoted from this sandbox). The connector itself
	// treats `success` as part of an event's identity when there is no pspReference (it hashes
	// the signed fields, success among them: "only the signed fields may say which event this
	// is"), but drops it as soon as there is one.
	//
	// Interleaving:
	//  1. Adyen POSTs AUTHORISATION for psp 8815…0099 with success=false (reason "Refused").
	//     The ingress verifies it and creates adyen-<sha(psp:AUTHORISATION)> with
	//     eventType PAYMENT_INTENT_AUTHORIZATION_FAILURE; 200.
	//  2. Adyen POSTs AUTHORISATION for the same psp with success=true, correctly signed (the
	//     signature covers success=true). The ingress verifies it, builds a PaymentEvent with
	//     the same name, Create gets AlreadyExists, and store() acknowledges 200
	//     {"duplicate":true, "event_type":"PAYMENT_INTENT_AUTHORIZATION_FAILURE"}.
	//  3. Adyen marks the message delivered and never sends it again.
	//
	// Reachable: both steps are ordinary signed Adyen deliveries to POST /v1/webhooks/adyen; no
	// fault is needed. (If Adyen's own behaviour were ever doubted: the code path is "any two
	// verified events whose connector ids collide", and nothing compares BodySHA256, event type
	// or amount before saying "duplicate".)
	//
	// What a user sees: the only PaymentEvent says the authorisation FAILED; sinks (billing)
	// get PAYMENT_INTENT_AUTHORIZATION_FAILURE only, the customer who was in fact authorised is
	// never served, and nothing (log, metric, Kubernetes event) says a verified event with
	// different content was thrown away: videogen_webhook_duplicates_total counts it as a
	// plain redelivery.
	//
	// Fix (suggested, not implemented): on AlreadyExists compare the stored object with the
	// delivery (at least BodySHA256, or the signed fields: event type, success/status,
	// amount); when they differ it is not a duplicate: either key Adyen items by
	// psp:eventCode:success (what Adyen documents as the duplicate key), or store the new one
	// under a name that includes a hash of its signed content, and log/count a "conflicting
	// event id" outcome instead of a silent 200 duplicate.
	It("stores an Adyen AUTHORISATION whose success went from false to true, not a 200 duplicate of the refusal", func() {
		in := startIngress(newNamespace("adv12-adyen"), withAdyen)
		refused := adyenOutcome{psp: "8815000000000099", eventCode: "AUTHORISATION", success: "false", reason: "Refused", value: 4200}
		authorised := adyenOutcome{psp: "8815000000000099", eventCode: "AUTHORISATION", success: "true", value: 4200}

		first := in.post("adyen", refused.body(), nil)
		Expect(first.status).To(Equal(http.StatusOK))
		Expect(first.ack.EventType).To(Equal("PAYMENT_INTENT_AUTHORIZATION_FAILURE"))

		second := in.post("adyen", authorised.body(), nil)
		var types []string
		for _, pe := range in.paymentEvents() {
			types = append(types, pe.Spec.EventType)
		}
		Expect(types).To(ContainElement("PAYMENT_INTENT_AUTHORIZATION_SUCCESS"),
			"the verified success=true AUTHORISATION was answered %d %+v but is stored nowhere: PaymentEvents hold only %v",
			second.status, second.ack, types)
	})

	// Checked, holds (a pin). The same Stripe event posted 20 times at once, half to each of
	// two ingress replicas (two Handlers sharing the kube-apiserver, as two apiserver pods do),
	// while a third replica's first create of it lands and then reports a timeout (an
	// etcd/apiserver timeout after the write committed: reachable whenever the apiserver is
	// slow). Every answer is 200, or 503 from the faulty replica only (never a 2xx without the
	// object, never a 500), exactly one PaymentEvent exists, and at most one 2xx says stored=1
	// (none when the faulty replica's landed create won the race: then every 2xx is a
	// duplicate). A processor retrying the 503 gets a duplicate 200.
	It("keeps one PaymentEvent and honest answers for one event raced over three replicas, one of whose creates lands then errors", func() {
		ns := newNamespace("adv12-race")
		a := startIngress(ns, configured)
		b := startIngress(ns, configured)
		body := stripeEvent("evt_adv12_race")

		base, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		landThenFail := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err
				}
				return errors.New("etcdserver: request timed out") // the write landed
			},
		})
		lying := startIngress(ns, configured, func(o *webhookingress.Options) { o.Client = landThenFail })

		var mu sync.Mutex
		statuses := map[int]int{}
		stored := 0
		var wg sync.WaitGroup
		for i := range 21 {
			wg.Go(func() {
				defer GinkgoRecover()
				in := a
				switch {
				case i == 20:
					in = lying
				case i%2 == 1:
					in = b
				}
				ans := in.postStripe(body, stripeSecret)
				mu.Lock()
				defer mu.Unlock()
				statuses[ans.status]++
				if ans.status == http.StatusOK && ans.ack.Stored == 1 {
					stored++
				}
			})
		}
		wg.Wait()
		Expect(statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable]).To(Equal(21), "answers %v", statuses)
		Expect(statuses[http.StatusOK]).To(BeNumerically(">=", 20), "answers %v", statuses)
		Expect(stored).To(BeNumerically("<=", 1))
		Expect(a.paymentEvents()).To(HaveLen(1))

		retry := a.postStripe(body, stripeSecret)
		Expect(retry.status).To(Equal(http.StatusOK))
		Expect(retry.ack.Duplicate).To(BeTrue())
		Expect(a.paymentEvents()).To(HaveLen(1))
	})
})
