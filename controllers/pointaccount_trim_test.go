package controllers_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var _ = Describe("PointAccount trimming", func() {
	It("are looked up only when they are trimmed, not on every reconcile", func() {
		ns := newAccount(0) // no manager runs here: the ledger tops up
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, ns, ledger.TopUp("seed", "seed-uid", 100))
		Expect(err).NotTo(HaveOccurred())
		_, err = l.Do(ctx, ns, ledger.ForgetTopUp("seed-uid"))
		Expect(err).NotTo(HaveOccurred())
		_, err = l.Do(ctx, ns, ledger.Freeze("done", 10))
		Expect(err).NotTo(HaveOccurred())
		_, err = l.Do(ctx, ns, ledger.Settle("done", videogenv1alpha1.SettlementDeducted))
		Expect(err).NotTo(HaveOccurred())

		// The manager's cache holds only open tasks, so a settled task is a cache miss that
		// costs a read of the kube-apiserver.
		openOnly := without[*videogenv1alpha1.VideoTask]("videotasks")
		var reads atomic.Int32
		fresh := interceptor.NewClient(withWatch(), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				reads.Add(1)
				return c.Get(ctx, key, obj, opts...)
			},
		})
		clock := clocktesting.NewFakePassiveClock(time.Now())
		r := &controllers.PointAccountReconciler{
			Client: openOnly, APIReader: fresh, Ledger: ledger.New(k8sClient, k8sClient),
			Recorder: events.NewFakeRecorder(10), Clock: clock,
			HoldGracePeriod: time.Hour, ReservationTTL: time.Hour,
		}
		req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}

		res, err := r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(reads.Load()).To(BeZero(), "a young record is left for the settling controller's own forget")
		Expect(res.RequeueAfter).To(And(BeNumerically(">", 0), BeNumerically("<=", 2*time.Second)))
		Expect(accountOf(ns).Status.Settlements).To(HaveLen(1))

		clock.SetTime(clock.Now().Add(3 * time.Second))
		_, err = r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(reads.Load()).To(Equal(int32(1)), "one fresh read of the task, which is gone")
		Expect(accountOf(ns).Status.Settlements).To(BeEmpty())
	})
})

// without is a client of the test apiserver whose Gets of T answer NotFound, as a cache that
// does not hold (or has not seen yet) an object of that kind.
func without[T client.Object](resource string) client.Client {
	return interceptor.NewClient(withWatch(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(T); ok {
				return apierrors.NewNotFound(videogenv1alpha1.GroupVersion.WithResource(resource).GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

func withWatch() client.WithWatch {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}
