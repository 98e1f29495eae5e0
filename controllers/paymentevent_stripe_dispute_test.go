package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/stripe"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// storedStripeDispute stores a Stripe charge.dispute.* event of dispute id in status, as the
// stripe connector reads it and the ingress stores it (under its own evt_ id).
func storedStripeDispute(ns, eventType, disputeID, status string) *videogenv1alpha1.PaymentEvent {
	GinkgoHelper()
	id := envsuite.Unique("evt")
	body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":{"id":%q,`+
		`"object":"dispute","amount":1000,"charge":"ch_1AZtxr2eZvKYlo2CJDX8whov","currency":"usd","created":1680651737,`+
		`"payment_intent":null,"reason":"general","status":%q}}}`, id, eventType, time.Now().Unix(), disputeID, status))
	ev, err := stripe.New().Parse(&connectors.Request{Body: body})
	Expect(err).NotTo(HaveOccurred())
	Expect(ev.Type).To(Equal(connectors.DisputeCreated), "%s %s", eventType, status)
	ev.Connector, ev.Complete = "stripe", true
	pe := paymentevents.FromEvent(ev, ns, body, time.Now())
	Expect(k8sClient.Create(ctx, pe)).To(Succeed())
	return pe
}

var _ = Describe("A Stripe inquiry that becomes a chargeback", func() {
	// The chargeback of a Stripe inquiry gave no "Dispute … opened" Warning.
	//
	// Stripe: an inquiry is a Dispute in a warning_ status (warning_needs_response,
	// warning_under_review, warning_closed) and withdraws no funds; if the issuer escalates it,
	// the same Dispute moves to needs_response and Stripe sends charge.dispute.funds_withdrawn,
	// which the connector now maps to DISPUTE_CREATED. An ordinary chargeback sends it too, right
	// after its charge.dispute.created.
	//
	// Interleaving: charge.dispute.created warning_needs_response is stored and recorded (Warning:
	// an inquiry opened); days later funds_withdrawn of the same dispute id, needs_response, is
	// stored and recorded. Before the fix the controller counted only Adyen's and Square's
	// inquiries as a stage of their own, so the funds_withdrawn found an opening of its dispute
	// recorded before and got its Normal event only: whoever watches Warnings learned of an
	// inquiry and never that the money was taken back. A Stripe dispute in a warning_ status
	// now counts as an inquiry.
	//
	// FAILED before the fix: the funds_withdrawn's events never contained DisputeCreated.
	It("warns again when a Stripe inquiry's funds are withdrawn", func() {
		startPaymentManager(paymentEventOptions(5))
		ns := newPaymentNamespace()
		disputeID := envsuite.Unique("du_inq")

		inquiry := storedStripeDispute(ns, "charge.dispute.created", disputeID, "warning_needs_response")
		processedEvent(inquiry)
		Eventually(func() []string { return eventReasons(ns, inquiry.Name) }).Should(ContainElement(videogenv1alpha1.ReasonDisputeCreated))

		afterRecorded(inquiry)
		withdrawn := storedStripeDispute(ns, "charge.dispute.funds_withdrawn", disputeID, "needs_response")
		processedEvent(withdrawn)
		Eventually(func() []string { return eventReasons(ns, withdrawn.Name) }).Should(ContainElement(videogenv1alpha1.ReasonDisputeCreated))
	})

	// Checked, holds: an ordinary chargeback (no inquiry before it) sends created and then
	// funds_withdrawn, both DISPUTE_CREATED of one dispute at one stage: one Warning.
	It("warns once for a chargeback's created then funds_withdrawn", func() {
		startPaymentManager(paymentEventOptions(5))
		ns := newPaymentNamespace()
		disputeID := envsuite.Unique("du_cb")

		created := storedStripeDispute(ns, "charge.dispute.created", disputeID, "needs_response")
		processedEvent(created)
		Eventually(func() []string { return eventReasons(ns, created.Name) }).Should(ContainElement(videogenv1alpha1.ReasonDisputeCreated))

		afterRecorded(created)
		withdrawn := storedStripeDispute(ns, "charge.dispute.funds_withdrawn", disputeID, "needs_response")
		processedEvent(withdrawn)
		Eventually(func() []string { return eventReasons(ns, withdrawn.Name) }).Should(ContainElement(videogenv1alpha1.ReasonPaymentReceived))
		Consistently(func() []string { return eventReasons(ns, withdrawn.Name) }).WithTimeout(time.Second).
			ShouldNot(ContainElement(videogenv1alpha1.ReasonDisputeCreated))
	})
})
