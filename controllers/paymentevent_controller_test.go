package controllers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// receiver is a sink that verifies every delivery with the Standard Webhooks reference library
// and answers with a scripted status per attempt (the last one repeats).
type receiver struct {
	server   *httptest.Server
	secret   string
	mu       sync.Mutex
	statuses []int
	attempts []delivery
}

type delivery struct {
	webhookID string
	verified  error
	body      string
}

func newReceiver(statuses ...int) *receiver {
	r := &receiver{secret: standardwebhooks.NewSecret(), statuses: statuses}
	wh, err := reference.NewWebhook(r.secret)
	Expect(err).NotTo(HaveOccurred())
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts = append(r.attempts, delivery{webhookID: req.Header.Get("webhook-id"), verified: wh.Verify(body, req.Header), body: string(body)})
		w.WriteHeader(r.statuses[min(len(r.attempts), len(r.statuses))-1])
	}))
	DeferCleanup(r.server.Close)
	return r
}

func (r *receiver) got() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.attempts...)
}

func (r *receiver) sink(name string) paymentevents.Sink {
	return paymentevents.Sink{Name: name, URL: r.server.URL, Secret: r.secret}
}

// paymentEventOptions are controller options forwarding to sinks with fast retries.
func paymentEventOptions(maxAttempts int32, sinks ...paymentevents.Sink) controllers.Options {
	opts := testOptions(testbackend.New())
	opts.PaymentEvents.Sinks = paymentevents.StaticSinks{Config: &paymentevents.SinkConfig{
		Sinks: sinks,
		Retry: paymentevents.RetryPolicy{InitialBackoff: metav1.Duration{Duration: 100 * time.Millisecond},
			MaxBackoff: metav1.Duration{Duration: 400 * time.Millisecond}, MaxAttempts: maxAttempts},
	}}
	return opts
}

// aPaymentEvent stores an event as the ingress would.
func aPaymentEvent(ns string, typ connectors.EventType) *videogenv1alpha1.PaymentEvent {
	id := envsuite.Unique("evt")
	ev := &connectors.Event{Connector: "stripe", Type: typ, ConnectorEventType: "charge.dispute.created",
		MerchantEventID: id, Complete: true,
		Dispute: &connectors.DisputeDetails{DisputeID: "dp_" + id, PaymentID: "pi_1", AmountMinor: 2000, Currency: "USD",
			Reason: "fraudulent", Status: "needs_response"}}
	pe := paymentevents.FromEvent(ev, ns, []byte(`{"id":"`+id+`"}`), time.Now())
	Expect(k8sClient.Create(ctx, pe)).To(Succeed())
	return pe
}

// aPaymentSucceeded stores a captured payment of amountMinor cents whose merchant reference
// names ns, as a processor would for a customer paying for points.
func aPaymentSucceeded(ns string, amountMinor int64) *videogenv1alpha1.PaymentEvent {
	id := envsuite.Unique("evt")
	ev := &connectors.Event{Connector: "stripe", Type: connectors.PaymentIntentSuccess, ConnectorEventType: "payment_intent.succeeded",
		MerchantEventID: id, Complete: true,
		Payment: &connectors.PaymentDetails{PaymentID: "pi_" + id, ConnectorTransactionID: "ch_" + id, MerchantReference: ns,
			AmountMinor: amountMinor, Currency: "USD", Status: "succeeded"}}
	pe := paymentevents.FromEvent(ev, ns, []byte(`{"id":"`+id+`"}`), time.Now())
	Expect(k8sClient.Create(ctx, pe)).To(Succeed())
	return pe
}

// processedEvent waits until the controller has recorded pe.
func processedEvent(pe *videogenv1alpha1.PaymentEvent) {
	GinkgoHelper()
	Eventually(func() bool {
		return meta.IsStatusConditionTrue(paymentEventOf(pe).Status.Conditions, videogenv1alpha1.ConditionProcessed)
	}).Should(BeTrue())
}

// figures are the amounts of an account that a payment event could move.
func figures(ns string) []int64 {
	st := suite.AccountOf(ns).Status
	return []int64{st.Balance, st.Frozen, st.Spent, st.Credited}
}

func paymentEventOf(pe *videogenv1alpha1.PaymentEvent) *videogenv1alpha1.PaymentEvent {
	got := &videogenv1alpha1.PaymentEvent{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pe), got)).To(Succeed())
	return got
}

// startPaymentManager starts a manager that is stopped when the spec ends, even when it fails,
// so that it cannot deliver another spec's events; stop may also be called earlier.
func startPaymentManager(opts controllers.Options) (stop func()) {
	stop = sync.OnceFunc(startManager(opts))
	DeferCleanup(stop)
	return stop
}

func newPaymentNamespace() string {
	ns := envsuite.Unique("payments")
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// deliveryRow waits for the row of sink to reach state.
func deliveryRow(pe *videogenv1alpha1.PaymentEvent, sink string, state videogenv1alpha1.DeliveryState) videogenv1alpha1.SinkDelivery {
	GinkgoHelper()
	var row videogenv1alpha1.SinkDelivery
	Eventually(func(g Gomega) {
		rows := paymentEventOf(pe).Status.Sinks
		g.Expect(rows).To(ContainElement(HaveField("Name", sink), &row))
		g.Expect(row.State).To(Equal(state))
	}).Should(Succeed())
	return row
}

var _ = Describe("PaymentEvent", func() {
	It("records the event and forwards it to a sink with a valid Standard Webhooks signature", func() {
		sink := newReceiver(http.StatusOK)
		startPaymentManager(paymentEventOptions(5, sink.sink("billing")))
		ns := newPaymentNamespace()
		pe := aPaymentEvent(ns, connectors.ChargeRefunded)

		row := deliveryRow(pe, "billing", videogenv1alpha1.DeliveryDelivered)
		Expect(row.Attempts).To(Equal(int32(1)))
		Expect(row.LastStatus).To(Equal(int32(200)))
		Expect(row.DeliveredAt).NotTo(BeNil())
		got := paymentEventOf(pe)
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, videogenv1alpha1.ConditionProcessed)).To(BeTrue())
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, videogenv1alpha1.ConditionForwarded)).To(BeTrue())
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))

		attempts := sink.got()
		Expect(attempts).To(HaveLen(1))
		Expect(attempts[0].verified).NotTo(HaveOccurred())
		Expect(attempts[0].webhookID).To(Equal(paymentevents.WebhookID(pe.Name, "billing")))
		Expect(attempts[0].body).To(ContainSubstring(`"type":"payment_event.charge_refunded"`))
		Expect(attempts[0].body).To(ContainSubstring(`"id":"` + pe.Name + `"`))
		// Events are written by the recorder's broadcaster, after the status the row shows.
		Eventually(func() []string { return eventReasons(ns, pe.Name) }).
			Should(ContainElements(videogenv1alpha1.ReasonPaymentReceived, videogenv1alpha1.ReasonSinksDelivered))
	})

	It("retries a failing sink with backoff under one webhook-id until it succeeds", func() {
		sink := newReceiver(http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusNoContent)
		startPaymentManager(paymentEventOptions(5, sink.sink("flaky")))
		pe := aPaymentEvent(newPaymentNamespace(), connectors.PaymentIntentSuccess)

		row := deliveryRow(pe, "flaky", videogenv1alpha1.DeliveryDelivered)
		Expect(row.Attempts).To(Equal(int32(3)))
		attempts := sink.got()
		Expect(attempts).To(HaveLen(3))
		for _, a := range attempts {
			Expect(a.verified).NotTo(HaveOccurred())
			Expect(a.webhookID).To(Equal(row.WebhookID))
			Expect(a.body).To(Equal(attempts[0].body))
		}
	})

	It("waits the whole backoff after an attempt that timed out, counted from its end", func() {
		var (
			mu       sync.Mutex
			arrivals []time.Time
		)
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			arrivals = append(arrivals, time.Now())
			first := len(arrivals) == 1
			mu.Unlock()
			if first {
				select { // past the sink's timeout
				case <-req.Context().Done():
				case <-time.After(6 * time.Second):
				}
			}
		}))
		DeferCleanup(slow.Close)
		sink := paymentevents.Sink{Name: "slow", URL: slow.URL, Secret: standardwebhooks.NewSecret(), Timeout: metav1.Duration{Duration: 4 * time.Second}}
		opts := paymentEventOptions(5, sink)
		// A 4 s backoff, scaled by its jitter into [2 s, 4 s].
		retry := &opts.PaymentEvents.Sinks.(paymentevents.StaticSinks).Config.Retry
		retry.InitialBackoff.Duration, retry.MaxBackoff.Duration = 4*time.Second, 4*time.Second
		startPaymentManager(opts)
		pe := aPaymentEvent(newPaymentNamespace(), connectors.PaymentIntentSuccess)

		row := deliveryRow(pe, "slow", videogenv1alpha1.DeliveryDelivered)
		Expect(row.Attempts).To(Equal(int32(2)))
		mu.Lock()
		defer mu.Unlock()
		// The first attempt ended 4 s after it arrived; the retry is due at least 2 s later, at
		// least 1 s even on a next-attempt time cut to the second. Counted from the attempt's
		// start, the whole backoff had passed when it failed, and the retry went out at once.
		Expect(arrivals[1].Sub(arrivals[0])).To(BeNumerically(">=", 4500*time.Millisecond),
			"the retry waited its backoff after the timed-out attempt ended")
	})

	It("stops at the first 410 Gone", func() {
		sink := newReceiver(http.StatusGone, http.StatusOK)
		startPaymentManager(paymentEventOptions(5, sink.sink("retired")))
		pe := aPaymentEvent(newPaymentNamespace(), connectors.PaymentIntentSuccess)

		row := deliveryRow(pe, "retired", videogenv1alpha1.DeliveryFailed)
		Expect(row.Attempts).To(Equal(int32(1)))
		Expect(row.LastStatus).To(Equal(int32(410)))
		Consistently(func() int { return len(sink.got()) }).WithTimeout(time.Second).Should(Equal(1))
		forwarded := meta.FindStatusCondition(paymentEventOf(pe).Status.Conditions, videogenv1alpha1.ConditionForwarded)
		Expect(forwarded.Status).To(Equal(metav1.ConditionFalse))
		Expect(forwarded.Reason).To(Equal(videogenv1alpha1.ReasonSinkFailed))
		Expect(forwarded.Message).To(ContainSubstring("410"))
		// Processed is written before any delivery: it may not say the event was forwarded
		// where Forwarded says it was not.
		recorded := meta.FindStatusCondition(paymentEventOf(pe).Status.Conditions, videogenv1alpha1.ConditionProcessed)
		Expect(recorded.Message).NotTo(ContainSubstring("forwarded to"))
		Expect(recorded.Message).To(ContainSubstring("1 sink(s) take it (Forwarded says how its delivery went)"))
	})

	It("gives up after the last attempt and says so", func() {
		sink := newReceiver(http.StatusInternalServerError)
		startPaymentManager(paymentEventOptions(3, sink.sink("down")))
		ns := newPaymentNamespace()
		pe := aPaymentEvent(ns, connectors.PaymentIntentSuccess)

		row := deliveryRow(pe, "down", videogenv1alpha1.DeliveryFailed)
		Expect(row.Attempts).To(Equal(int32(3)))
		Expect(row.LastError).To(ContainSubstring("gave up after 3 attempts"))
		Expect(sink.got()).To(HaveLen(3))
		Eventually(func() []string { return eventReasons(ns, pe.Name) }).Should(ContainElement(videogenv1alpha1.ReasonSinkFailed))
	})

	It("redelivers what it gave up when asked, once per request, under the same webhook-id", func() {
		sink := newReceiver(http.StatusInternalServerError, http.StatusInternalServerError, http.StatusOK)
		startPaymentManager(paymentEventOptions(2, sink.sink("flaky")))
		ns := newPaymentNamespace()
		pe := aPaymentEvent(ns, connectors.PaymentIntentSuccess)
		deliveryRow(pe, "flaky", videogenv1alpha1.DeliveryFailed)

		ask := func(value string) {
			GinkgoHelper()
			patch := client.MergeFrom(pe.DeepCopy())
			pe.Annotations = map[string]string{videogenv1alpha1.AnnotationRedeliver: value}
			Expect(k8sClient.Patch(ctx, pe, patch)).To(Succeed())
		}
		ask("1")
		row := deliveryRow(pe, "flaky", videogenv1alpha1.DeliveryDelivered)
		Expect(row.Attempts).To(Equal(int32(1)), "a fresh count of attempts")
		got := sink.got()
		Expect(got).To(HaveLen(3))
		Expect(got[2].webhookID).To(Equal(got[0].webhookID), "the same webhook-id: a sink can tell the same event")
		Expect(paymentEventOf(pe).Status.RedeliverHandled).To(Equal("1"))
		Expect(meta.IsStatusConditionTrue(paymentEventOf(pe).Status.Conditions, videogenv1alpha1.ConditionForwarded)).To(BeTrue())
		Eventually(func() []string { return eventReasons(ns, pe.Name) }).Should(ContainElement(videogenv1alpha1.ReasonRedeliver))

		// Delivered: asking again sends nothing.
		ask("2")
		Eventually(func() string { return paymentEventOf(pe).Status.RedeliverHandled }).Should(Equal("2"))
		Consistently(func() int { return len(sink.got()) }).WithTimeout(time.Second).Should(Equal(3))
	})

	It("resumes a pending delivery after a manager restart", func() {
		sink := newReceiver(http.StatusServiceUnavailable, http.StatusOK)
		opts := paymentEventOptions(5, sink.sink("billing"))
		// Long enough that the first manager is stopped before the retry is due.
		retry := &opts.PaymentEvents.Sinks.(paymentevents.StaticSinks).Config.Retry
		retry.InitialBackoff.Duration, retry.MaxBackoff.Duration = 3*time.Second, 3*time.Second
		stop := startPaymentManager(opts)
		pe := aPaymentEvent(newPaymentNamespace(), connectors.PaymentIntentSuccess)
		Eventually(func() []videogenv1alpha1.SinkDelivery { return paymentEventOf(pe).Status.Sinks }).
			Should(ConsistOf(And(HaveField("Attempts", int32(1)), HaveField("State", videogenv1alpha1.DeliveryPending))))
		stop()
		Expect(sink.got()).To(HaveLen(1))

		startPaymentManager(opts)
		row := deliveryRow(pe, "billing", videogenv1alpha1.DeliveryDelivered)
		Expect(row.Attempts).To(Equal(int32(2)))
		Expect(sink.got()).To(HaveLen(2))
		Expect(sink.got()[1].webhookID).To(Equal(sink.got()[0].webhookID))
	})

	It("warns about a new dispute with a Kubernetes event, and records an event no sink wants", func() {
		startPaymentManager(paymentEventOptions(5))
		ns := newPaymentNamespace()
		disputes := map[string]string{"connector": "stripe", "event_type": "DISPUTE_CREATED"}
		before := metricValue("videogen_payment_events_processed_total", disputes)
		pe := aPaymentEvent(ns, connectors.DisputeCreated)

		Eventually(func() []string { return eventReasons(ns, pe.Name) }).Should(ContainElement(videogenv1alpha1.ReasonDisputeCreated))
		types := map[string]string{}
		for _, e := range eventsAbout(ns, pe.Name) {
			types[e.Reason] = e.Type
		}
		Expect(types).To(HaveKeyWithValue(videogenv1alpha1.ReasonDisputeCreated, corev1.EventTypeWarning))
		Expect(types).To(HaveKeyWithValue(videogenv1alpha1.ReasonPaymentReceived, corev1.EventTypeNormal))
		// Counted once, by the event's connector and type, however often it is reconciled.
		Eventually(func() float64 { return metricValue("videogen_payment_events_processed_total", disputes) }).Should(Equal(before + 1))
		Consistently(func() float64 { return metricValue("videogen_payment_events_processed_total", disputes) }).
			WithTimeout(500 * time.Millisecond).Should(Equal(before + 1))
		got := paymentEventOf(pe)
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, videogenv1alpha1.ConditionProcessed)).To(BeTrue())
		forwarded := meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionForwarded)
		Expect(forwarded.Reason).To(Equal(videogenv1alpha1.ReasonNoSinks))
		Expect(got.Status.Sinks).To(BeEmpty())
		Expect(meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionProcessed).Message).
			To(ContainSubstring("recorded; no configured sink takes it;"))

		// Asked to redeliver, it says there is no sink to send to, not that every sink has it.
		patch := client.MergeFrom(got.DeepCopy())
		got.Annotations = map[string]string{videogenv1alpha1.AnnotationRedeliver: "1"}
		Expect(k8sClient.Patch(ctx, got, patch)).To(Succeed())
		Eventually(func() []string { return eventNotes(ns, pe.Name) }).Should(ContainElement(
			"Redeliver: Redelivery asked; no configured sink accepts this event (NoSinks): it was sent nowhere and there is nothing to send again"))
		got = paymentEventOf(pe)
		Expect(got.Status.RedeliverHandled).To(Equal("1"))
		Expect(meta.FindStatusCondition(got.Status.Conditions, videogenv1alpha1.ConditionForwarded)).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", videogenv1alpha1.ReasonNoSinks)))
	})

	It("names the charge of a dispute whose payment the processor did not name", func() {
		startPaymentManager(paymentEventOptions(5))
		ns := newPaymentNamespace()
		id := envsuite.Unique("evt")
		ev := &connectors.Event{Connector: "stripe", Type: connectors.DisputeCreated, ConnectorEventType: "charge.dispute.created",
			MerchantEventID: id, Complete: true,
			Dispute: &connectors.DisputeDetails{DisputeID: "du_" + id, ConnectorTransactionID: "ch_" + id, AmountMinor: 1000,
				Currency: "USD", Reason: "general", Status: "warning_needs_response"}}
		pe := paymentevents.FromEvent(ev, ns, []byte(`{"id":"`+id+`"}`), time.Now())
		Expect(k8sClient.Create(ctx, pe)).To(Succeed())

		Eventually(func() []string { return eventNotes(ns, pe.Name) }).Should(ContainElement(
			`DisputeCreated: Dispute du_` + id + ` opened on transaction ch_` + id + ` for 1000 USD (minor units), reason "general"`))
	})

	It("never changes a PointAccount's balance for a PAYMENT_INTENT_SUCCESS event", func() {
		startPaymentManager(paymentEventOptions(5))
		ns := suite.NewAccount(1000)
		suite.ExpectBalanced(ns, 1000, 0, 0)
		before := figures(ns)

		pe := aPaymentSucceeded(ns, 5000)
		processedEvent(pe)
		Consistently(func() []int64 { return figures(ns) }).WithTimeout(2 * time.Second).Should(Equal(before))
		var topUps videogenv1alpha1.PointTopUpList
		Expect(k8sClient.List(ctx, &topUps, client.InNamespace(ns))).To(Succeed())
		Expect(topUps.Items).To(ConsistOf(HaveField("Name", "initial")))
	})

	It("keeps the spec immutable", func() {
		pe := aPaymentEvent(newPaymentNamespace(), connectors.PaymentIntentSuccess)
		// No manager runs here: left behind, the event would reach the next spec's sinks.
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pe))).To(Succeed()) })
		pe.Spec.EventType = "CHARGE_REFUNDED"
		Expect(k8sClient.Update(ctx, pe)).To(MatchError(ContainSubstring("a payment event is immutable")))
	})
})
