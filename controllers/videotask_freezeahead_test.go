package controllers_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var _ = Describe("A backlog of new tasks", func() {
	It("is frozen in a few account writes, oldest first, and a short balance refuses the youngest", func() {
		const n, price = 30, 10
		ns := newAccount(0) // no manager runs yet: the ledger tops up
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, ns, ledger.TopUp("seed", "seed-uid", n*price))
		Expect(err).NotTo(HaveOccurred())
		_, err = l.Do(ctx, ns, ledger.ForgetTopUp("seed-uid"))
		Expect(err).NotTo(HaveOccurred())
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(price).Create()

		// n tasks applied while no manager runs, then one more, a second later (creation
		// timestamps have one-second resolution): the balance covers the n older ones only.
		backend := testbackend.New()
		var older []string
		for range n {
			t := aShortTask(ns, tmpl).Create()
			backend.Set(t.Name, testbackend.Script{Analyze: testbackend.Hang})
			older = append(older, t.Name)
		}
		time.Sleep(1100 * time.Millisecond)
		youngest := aShortTask(ns, tmpl).Create().Name

		// Account writes that changed the number of holds (not the PointAccount controller's
		// conditions, nor conflicts).
		var freezeWrites, lastHolds atomic.Int32
		stop := startManager(testOptions(backend), func(c *rest.Config, o client.Options) (client.Client, error) {
			base, err := client.NewWithWatch(c, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(base, interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					// Only this account: the manager also reconciles the accounts of earlier specs.
					a, ok := obj.(*videogenv1alpha1.PointAccount)
					ok = ok && a.Namespace == ns
					holds := 0
					if ok {
						holds = a.Status.HoldCount()
					}
					err := c.SubResource(sub).Update(ctx, obj, opts...)
					if ok && err == nil && int32(holds) != lastHolds.Swap(int32(holds)) {
						freezeWrites.Add(1)
					}
					return err
				},
			}), nil
		})
		defer stop()

		for _, name := range older {
			Eventually(func() videogenv1alpha1.ChargeState { return taskOf(ns, name).Status.Charge }).
				Should(Equal(videogenv1alpha1.ChargeFrozen), name)
		}
		done := finished(ns, youngest)
		Expect(done.Status.Error).NotTo(BeNil())
		Expect(done.Status.Error.Code).To(Equal("insufficient_balance"))
		expectBalanced(ns, 0, n*price, 0)
		// One write freezes the whole backlog; a freeze per task took n/8 to n writes (eight
		// workers, each freeze sharing a write with those in flight beside it).
		Expect(freezeWrites.Load()).To(BeNumerically("<=", 2))
	})
})
