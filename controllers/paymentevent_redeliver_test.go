package controllers_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

var _ = Describe("PaymentEvent deliveries", func() {
	// FAILS (a pending delivery is never made again; the redeliver request is never carried out).
	//
	// What breaks: redeliver() copies the annotation's value into status.redeliverHandled,
	// which the CRD caps at 256 characters (MaxLength=256), while the annotation itself takes
	// any value ("Any new value is a new request"). A value over 256 characters makes the status
	// write 422 Invalid on every reconcile; Reconcile returns before forward(), so the event's
	// other, still pending, sink rows are never attempted again either. Nothing clears it but
	// a human noticing "Reconciler error" in the manager log and re-annotating.
	//
	// Interleaving:
	//  1. The event is recorded with two sinks: "gone" answers 410 (row Failed at once), "billing"
	//     answers 503 then 200 (row Pending, next attempt in ~1.5 s).
	//  2. A platform admin asks for redelivery with a descriptive value longer than 256
	//     characters (e.g. an incident note, or a JSON blob written by tooling), within the
	//     `patch paymentevents` RBAC docs/deploy.md gives the videogen-platform-admin-keys role.
	//  3. Every later reconcile: processed → redeliverRequested → Status().Update → 422; forward
	//     is skipped. The "billing" retry that was due never happens.
	//
	// Reachable: step 1 is two configured sinks and an ordinary 410/503 from them; step 2 is
	// `kubectl annotate --overwrite videogen.dev/redeliver=...` by an admin, the documented
	// way to ask; the API server accepts annotation values far longer than 256 characters.
	//
	// What a user sees: the billing sink never receives the event (Forwarded stays Unknown or
	// False, the "billing" row stays Pending with a NextAttemptAt in the past), the Failed row
	// is never redelivered, no Redeliver event; only the manager's log shows a 422 loop.
	//
	// Fix (suggested): validate/bound what is copied (store a hash or a truncation of the
	// annotation value in redeliverHandled and compare against the same transform), and never
	// let a failed redeliver bookkeeping write block forward() of pending rows.
	It("keeps delivering pending rows and carries out a redeliver request whose value is longer than 256 characters", func() {
		gone := newReceiver(http.StatusGone, http.StatusOK)
		// Refuses three times: its row stays Pending for seconds, whatever the status writes
		// coalesce under load.
		billing := newReceiver(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK)
		opts := paymentEventOptions(5, gone.sink("gone"), billing.sink("billing"))
		retry := &opts.PaymentEvents.Sinks.(paymentevents.StaticSinks).Config.Retry
		retry.InitialBackoff, retry.MaxBackoff = metav1.Duration{Duration: 1500 * time.Millisecond}, metav1.Duration{Duration: 1500 * time.Millisecond}
		startPaymentManager(opts)
		pe := aPaymentEvent(newPaymentNamespace(), connectors.DisputeCreated)

		deliveryRow(pe, "gone", videogenv1alpha1.DeliveryFailed)
		Eventually(func() []videogenv1alpha1.SinkDelivery { return paymentEventOf(pe).Status.Sinks }).
			Should(ContainElement(And(HaveField("Name", "billing"), HaveField("Attempts", BeNumerically(">=", 1)),
				HaveField("State", videogenv1alpha1.DeliveryPending))))

		note := "gone sink fixed after INC-4711; " + strings.Repeat("x", 300)
		patch := client.MergeFrom(pe.DeepCopy())
		pe.Annotations = map[string]string{videogenv1alpha1.AnnotationRedeliver: note}
		Expect(k8sClient.Patch(ctx, pe, patch)).To(Succeed(), "the kube-apiserver takes the annotation")

		Eventually(func() []videogenv1alpha1.SinkDelivery { return paymentEventOf(pe).Status.Sinks }).
			WithTimeout(10*time.Second).
			Should(ContainElement(And(HaveField("Name", "billing"), HaveField("State", videogenv1alpha1.DeliveryDelivered))),
				func() string {
					return fmt.Sprintf("the billing retries, due every 1.5 s, are never made (sink saw %d attempt(s))", len(billing.got()))
				})
		Eventually(func() []videogenv1alpha1.SinkDelivery { return paymentEventOf(pe).Status.Sinks }).
			WithTimeout(10 * time.Second).
			Should(ContainElement(And(HaveField("Name", "gone"), HaveField("State", videogenv1alpha1.DeliveryDelivered))))
	})
})
