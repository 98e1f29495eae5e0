package webhookingress_test

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

var _ = Describe("A PaymentEvent create that lands, then answers 504 Timeout", func() {
	// Checked, holds (a regression pin: the earlier race test answers a plain error, not the
	// kube-apiserver's Status). Interleaving: replica A's create of evt lands in etcd, but the
	// kube-apiserver answers 504 Timeout (etcd slow to confirm); A answers the processor 503.
	// The processor's retry reaches A again, and a concurrent resend reaches replica B. Both
	// find the stored object, compare it, and answer 200 duplicate: never 409, never a second
	// PaymentEvent, never 5xx again.
	It("answers 503, then 200 duplicate to the retries on either replica, with one PaymentEvent", func() {
		ns := newNamespace("adv27-504")
		base, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		timeout := apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
		landsThenTimesOut := interceptor.NewClient(base, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err // a retry's AlreadyExists goes through
				}
				return timeout // the write landed
			},
		})
		a := startIngress(ns, configured, func(o *webhookingress.Options) { o.Client = landsThenTimesOut })
		b := startIngress(ns, configured)
		body := stripeEvent("evt_adv27_504")

		first := a.postStripe(body, stripeSecret)
		Expect(first.status).To(Equal(http.StatusServiceUnavailable))
		Expect(first.err.Code).To(Equal("service_unavailable"))
		Expect(a.paymentEvents()).To(HaveLen(1), "the create landed")

		for _, in := range []*ingress{a, b} {
			retry := in.postStripe(body, stripeSecret)
			Expect(retry.status).To(Equal(http.StatusOK), "retry answered %+v", retry.err)
			Expect(retry.ack.Duplicate).To(BeTrue())
			Expect(retry.ack.MerchantEventID).To(Equal("evt_adv27_504"))
		}
		Expect(a.paymentEvents()).To(HaveLen(1))
	})
})

var _ = Describe("A redelivery of an event whose PaymentEvent is being deleted", func() {
	// FAILED before the fix: 200 {"duplicate":true}, then the object was gone.
	//
	// Interleaving: (1) evt is stored. (2) It is deleted while something holds it (a finalizer
	// of a backup or audit controller, `kubectl delete --cascade=foreground`): it stays, with a
	// deletionTimestamp, until that lets go. (3) The processor resends evt (a retry, a resend
	// from its dashboard). Create answers AlreadyExists and the stored event has the same
	// content, so it was acknowledged as a duplicate; (4) the holder lets go and the object
	// disappears: the processor was told the event is stored, and it is stored nowhere. A
	// retry after the deletion completes stores it again (limits_and_retries_test.go); during it, it must not be
	// acknowledged.
	It("does not acknowledge a redelivery of an event whose PaymentEvent is being deleted", func() {
		in := startIngress(newNamespace("adv27-terminating"), configured)
		body := stripeEvent("evt_adv27_terminating")
		Expect(in.postStripe(body, stripeSecret).status).To(Equal(http.StatusOK))

		pe := &videogenv1alpha1.PaymentEvent{}
		key := client.ObjectKey{Namespace: in.ns, Name: paymentevents.Name("stripe", "evt_adv27_terminating")}
		Expect(k8sClient.Get(ctx, key, pe)).To(Succeed())
		pe.Finalizers = append(pe.Finalizers, "example.com/audit-hold")
		Expect(k8sClient.Update(ctx, pe)).To(Succeed())
		Expect(k8sClient.Delete(ctx, pe)).To(Succeed())

		during := in.postStripe(body, stripeSecret)
		Expect(during.status).To(Equal(http.StatusServiceUnavailable),
			"a redelivery while the event is being deleted was answered %d %+v", during.status, during.ack)

		Expect(k8sClient.Get(ctx, key, pe)).To(Succeed())
		pe.Finalizers = nil
		Expect(k8sClient.Update(ctx, pe)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, key, pe)) }).Should(BeTrue())

		after := in.postStripe(body, stripeSecret)
		Expect(after.status).To(Equal(http.StatusOK))
		Expect(after.ack.Stored).To(Equal(1))
		Expect(in.paymentEvents()).To(HaveLen(1))
	})
})
