package apiserver_test

import (
	"context"
	"net/http"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Two POST /v1/short-templates with one Idempotency-Key at once: both miss the template (none
// exists yet), the first creates it, the second's create meets it. docs/api.md (Idempotency-Key)
// says a retry with the key "answers 200 with the template it made", as a task's replay: so the
// first answers 201, the second 200 with Idempotent-Replayed: true and the same template,
// byte for byte, and one template is stored. The same when the first's create landed but the
// kube-apiserver answered it 504.
var _ = Describe("Two short-template creates with one Idempotency-Key at once", func() {
	DescribeTable("answer 201 to the one that created it and the 200 replay of it to the other",
		func(firstTimesOut bool) {
			a := newAccount(0)
			// The gate plays the interleaving: the first create waits until the second has
			// missed the template and reached its own create, which waits for the first's.
			var creates atomic.Int32
			secondArrived, firstDone := make(chan struct{}), make(chan struct{})
			srv := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
				return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if _, ok := obj.(*videogenv1alpha1.ShortTemplate); !ok {
							return c.Create(ctx, obj, opts...)
						}
						if creates.Add(1) == 2 {
							close(secondArrived)
							<-firstDone
							return c.Create(ctx, obj, opts...)
						}
						<-secondArrived
						defer close(firstDone)
						if err := c.Create(ctx, obj, opts...); err != nil || !firstTimesOut {
							return err
						}
						return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
					},
				})
			})
			body := map[string]any{"name": "Intro", "target_url": "https://cdn.example.com/intro.mp4"}
			answers := make(chan response, 2)
			for range 2 {
				go func() {
					defer GinkgoRecover()
					answers <- srv.post("/v1/short-templates", a.key, body, "Idempotency-Key", "at-once")
				}()
			}
			var created, replayed response
			for range 2 {
				var r response
				Eventually(answers).Should(Receive(&r))
				if r.Status == http.StatusCreated {
					created = r
				} else {
					replayed = r
				}
			}
			Expect(created.Status).To(Equal(http.StatusCreated), string(created.Body))
			Expect(created.Header.Get("Idempotent-Replayed")).To(BeEmpty())
			Expect(replayed.Status).To(Equal(http.StatusOK), string(replayed.Body))
			Expect(replayed.Header.Get("Idempotent-Replayed")).To(Equal("true"))
			Expect(replayed.Body).To(Equal(created.Body), "the replay is the template the first made")
			Expect(created.JSON()["id"]).To(HavePrefix("ushort_"))
			var stored videogenv1alpha1.ShortTemplateList
			Expect(k8sClient.List(ctx, &stored, client.InNamespace(a.ns))).To(Succeed())
			Expect(stored.Items).To(HaveLen(1))
		},
		Entry("the first's create answered", false),
		Entry("the first's create landed but answered 504", true),
	)
})
