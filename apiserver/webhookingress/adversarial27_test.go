package webhookingress_test

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/videogen-dev/videogen-operator/apiserver/webhookingress"
)

var _ = Describe("Adversarial: a PaymentEvent create that lands, then answers 504 Timeout (adv27)", func() {
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
