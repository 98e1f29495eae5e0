package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

var nsCounter atomic.Int32

// newFundedAccount makes a namespace with a PointAccount credited with balance points.
func newFundedAccount(balance int64) string {
	ns := fmt.Sprintf("ledger-%d", nsCounter.Add(1))
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &videogenv1alpha1.PointAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName},
	})).To(Succeed())
	if balance > 0 {
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, ns, ledger.TopUp("seed", "seed-uid", balance))
		Expect(err).NotTo(HaveOccurred())
	}
	return ns
}

func account(ns string) videogenv1alpha1.PointAccountStatus {
	var a videogenv1alpha1.PointAccount
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, &a)).To(Succeed())
	return a.Status
}

// freezeConcurrently runs n Freeze calls of amount at once, each through ledgerFor(i).
func freezeConcurrently(ns string, n int, amount int64, ledgerFor func(int) *ledger.Ledger) (ok, short int) {
	var wg sync.WaitGroup
	var okN, shortN atomic.Int32
	for i := range n {
		wg.Go(func() {
			defer GinkgoRecover()
			r, err := ledgerFor(i).Do(ctx, ns, ledger.Freeze(fmt.Sprintf("task-%d", i), amount))
			var ib *ledger.InsufficientBalanceError
			switch {
			case err == nil:
				Expect(r.Balance).To(BeNumerically(">=", 0))
				okN.Add(1)
			case errors.As(err, &ib):
				Expect(ib.Available).To(BeNumerically("<", amount))
				shortN.Add(1)
			default:
				Fail("unexpected error: " + err.Error())
			}
		})
	}
	wg.Wait()
	return int(okN.Load()), int(shortN.Load())
}

var _ = Describe("Ledger against a real apiserver", func() {
	It("lets exactly 20 of 50 concurrent 10-point freezes through on 200 points (one coalescing ledger)", func() {
		ns := newFundedAccount(200)
		l := ledger.New(k8sClient, k8sClient)
		ok, short := freezeConcurrently(ns, 50, 10, func(int) *ledger.Ledger { return l })
		Expect(ok).To(Equal(20))
		Expect(short).To(Equal(30))
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Balance).To(BeZero())
		Expect(st.Frozen).To(Equal(int64(200)))
		Expect(st.HoldCount()).To(Equal(20))
	})

	It("lets exactly 20 of 50 through when every caller is its own process (pure compare-and-swap)", func() {
		ns := newFundedAccount(200)
		ledgers := make([]*ledger.Ledger, 50)
		for i := range ledgers {
			ledgers[i] = ledger.New(k8sClient, k8sClient)
		}
		ok, short := freezeConcurrently(ns, 50, 10, func(i int) *ledger.Ledger { return ledgers[i] })
		Expect(ok).To(Equal(20))
		Expect(short).To(Equal(30))
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Balance).To(BeZero())
		Expect(st.HoldCount()).To(Equal(20))
	})

	It("settles a task once when many settlers race, and every one of them sees the same outcome", func() {
		ns := newFundedAccount(100)
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, ns, ledger.Freeze("t", 40))
		Expect(err).NotTo(HaveOccurred())

		var wg sync.WaitGroup
		var changed atomic.Int32
		for i := range 20 {
			outcome := videogenv1alpha1.SettlementDeducted
			if i%2 == 1 {
				outcome = videogenv1alpha1.SettlementRefunded
			}
			own := ledger.New(k8sClient, k8sClient) // separate writers, so they really conflict
			wg.Go(func() {
				defer GinkgoRecover()
				r, err := own.Do(ctx, ns, ledger.Settle("t", outcome))
				Expect(err).NotTo(HaveOccurred())
				if r.Changed {
					changed.Add(1)
				}
			})
		}
		wg.Wait()
		Expect(changed.Load()).To(Equal(int32(1)))
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Frozen).To(BeZero())
		Expect(st.Spent + st.Balance).To(Equal(int64(100)))
		Expect(st.Settlements).To(HaveLen(1))
	})

	It("answers each op of a batch on its own and writes them in one update", func() {
		ns := newFundedAccount(25)
		l := ledger.New(k8sClient, k8sClient)
		res, err := l.Apply(ctx, ns, ledger.Freeze("a", 10), ledger.Freeze("b", 10), ledger.Freeze("c", 10))
		Expect(err).NotTo(HaveOccurred())
		Expect(res[0].Err).NotTo(HaveOccurred())
		Expect(res[1].Err).NotTo(HaveOccurred())
		var ib *ledger.InsufficientBalanceError
		Expect(errors.As(res[2].Err, &ib)).To(BeTrue())
		Expect(res[2].Balance).To(Equal(int64(5)))
		Expect(account(ns).HoldsByTask()).To(HaveLen(2))
	})

	It("never refuses on a stale copy of its own last write when another writer changed the account", func() {
		ns := newFundedAccount(10)
		a, b := ledger.New(k8sClient, k8sClient), ledger.New(k8sClient, k8sClient)
		_, err := a.Do(ctx, ns, ledger.Freeze("first", 10)) // a now remembers balance 0
		Expect(err).NotTo(HaveOccurred())
		_, err = b.Do(ctx, ns, ledger.TopUp("more", "more-uid", 50))
		Expect(err).NotTo(HaveOccurred())
		_, err = b.Do(ctx, ns, ledger.Freeze("made-elsewhere", 5))
		Expect(err).NotTo(HaveOccurred())

		r, err := a.Do(ctx, ns, ledger.Freeze("second", 40))
		Expect(err).NotTo(HaveOccurred(), "a freeze affordable after the other writer's top-up")
		Expect(r.Balance).To(Equal(int64(5)))
		r, err = a.Do(ctx, ns, ledger.Settle("made-elsewhere", videogenv1alpha1.SettlementRefunded))
		Expect(err).NotTo(HaveOccurred(), "a hold made by the other writer")
		Expect(r.Changed).To(BeTrue())
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Balance).To(Equal(int64(10)))
	})

	It("reports a missing account and changes nothing", func() {
		l := ledger.New(k8sClient, k8sClient)
		_, err := l.Do(ctx, "no-such-namespace", ledger.Freeze("a", 1))
		Expect(errors.Is(err, ledger.ErrAccountNotFound)).To(BeTrue(), "got %v", err)
	})

	It("starts from the informer's copy when it is newer than its own last write: no conflict", func() {
		updates := func(withCache bool) int32 {
			ns := newFundedAccount(100)
			var n atomic.Int32
			counting := countingStatusWrites(&n)
			var opts []ledger.Option
			if withCache {
				opts = append(opts, ledger.WithCache(k8sClient)) // an always-current "informer"
			}
			a := ledger.New(counting, k8sClient, opts...)
			_, err := a.Do(ctx, ns, ledger.Freeze("x", 10))
			Expect(err).NotTo(HaveOccurred())
			// Another process writes: a's own last write is now stale.
			_, err = ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.TopUp("more", "more-uid", 5))
			Expect(err).NotTo(HaveOccurred())
			n.Store(0)
			_, err = a.Do(ctx, ns, ledger.Freeze("y", 10))
			Expect(err).NotTo(HaveOccurred())
			st := account(ns)
			Expect(ledger.Check(&st)).To(Succeed())
			Expect(st.Balance).To(Equal(int64(85)))
			return n.Load()
		}
		Expect(updates(false)).To(Equal(int32(2)), "a conflict, then the write")
		Expect(updates(true)).To(Equal(int32(1)))
	})

	It("answers a repeat from its own last write without a read, and reads fresh for a no-op that found nothing", func() {
		ns := newFundedAccount(100)
		var reads atomic.Int32
		wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		fresh := interceptor.NewClient(wc, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				reads.Add(1)
				return c.Get(ctx, key, obj, opts...)
			},
		})
		l := ledger.New(k8sClient, fresh)
		_, err = l.Do(ctx, ns, ledger.Freeze("a", 10))
		Expect(err).NotTo(HaveOccurred())
		reads.Store(0)

		r, err := l.Do(ctx, ns, ledger.Freeze("a", 10))
		Expect(err).NotTo(HaveOccurred())
		Expect([]any{r.Changed, r.Amount}).To(Equal([]any{false, int64(10)}))
		Expect(reads.Load()).To(BeZero(), "the hold is in the ledger's own last write, and only a's ops remove it")

		// Absence proves nothing on an older copy: another writer may have made the hold since.
		_, err = ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.Freeze("b", 10))
		Expect(err).NotTo(HaveOccurred())
		r, err = l.Do(ctx, ns, ledger.Release("b"))
		Expect(err).NotTo(HaveOccurred())
		Expect(reads.Load()).To(Equal(int32(1)), "one fresh read")
		Expect([]any{r.Changed, r.Amount}).To(Equal([]any{true, int64(10)}), "b's hold, found on the fresh read, was released")
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Balance).To(Equal(int64(90)))
	})

	It("writes ops started within a delay together, and answers a known repeat without starting that write early", func() {
		ns := newFundedAccount(100)
		var writes atomic.Int32
		l := ledger.New(countingStatusWrites(&writes), k8sClient)
		_, err := l.Apply(ctx, ns, ledger.Freeze("a", 10), ledger.Freeze("b", 20), ledger.Freeze("c", 30))
		Expect(err).NotTo(HaveOccurred())
		writes.Store(0)
		before := accountObject(ns).ResourceVersion

		first := l.StartWithin(time.Second, ns, ledger.Settle("a", videogenv1alpha1.SettlementDeducted))
		second := l.StartWithin(time.Second, ns, ledger.Settle("b", videogenv1alpha1.SettlementRefunded))
		r, err := l.Do(ctx, ns, ledger.Freeze("c", 30))
		Expect(err).NotTo(HaveOccurred())
		Expect([]any{r.Changed, r.Amount}).To(Equal([]any{false, int64(30)}))
		Expect(accountObject(ns).ResourceVersion).To(Equal(before), "the repeat neither wrote nor started the waiting settles' write")

		for _, done := range []<-chan []ledger.Result{first, second} {
			var res []ledger.Result
			Eventually(done, 5*time.Second).Should(Receive(&res))
			Expect(res[0].Err).NotTo(HaveOccurred())
			Expect(res[0].Changed).To(BeTrue())
		}
		Expect(writes.Load()).To(Equal(int32(1)), "both settles in one write")
		st := account(ns)
		Expect(ledger.Check(&st)).To(Succeed())
		Expect([]int64{st.Balance, st.Frozen, st.Spent}).To(Equal([]int64{60, 30, 10}))
	})

	It("carries piggybacked forgets on the account's next write, never in a write of their own", func() {
		ns := newFundedAccount(100)
		l := ledger.New(k8sClient, k8sClient)
		for _, task := range []string{"a", "b"} {
			_, err := l.Do(ctx, ns, ledger.Freeze(task, 10))
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := l.Do(ctx, ns, ledger.Settle("a", videogenv1alpha1.SettlementDeducted))
		Expect(err).NotTo(HaveOccurred())
		before := accountObject(ns)
		Expect(before.Status.Settlements).To(HaveLen(1))

		l.Piggyback(ns, ledger.ForgetSettlement("a"), ledger.ForgetSettlement("never-settled"),
			ledger.Freeze("not-a-rider", 10)) // only ops that move no points may ride
		// A no-op batch (a repeated freeze) writes nothing, so the riders wait.
		_, err = l.Do(ctx, ns, ledger.Freeze("b", 10))
		Expect(err).NotTo(HaveOccurred())
		Expect(accountObject(ns).ResourceVersion).To(Equal(before.ResourceVersion))

		_, err = l.Do(ctx, ns, ledger.Settle("b", videogenv1alpha1.SettlementRefunded))
		Expect(err).NotTo(HaveOccurred())
		after := accountObject(ns)
		Expect(after.Status.Settlements).To(ConsistOf(HaveField("Task", "b")), "a's record went with b's settle")
		Expect(after.Status.Holds).To(BeEmpty(), "the freeze did not ride along")
		Expect(ledger.Check(&after.Status)).To(Succeed())
		Expect([]int64{after.Status.Balance, after.Status.Spent}).To(Equal([]int64{90, 10}))
	})
})

// countingStatusWrites is a client of the test apiserver that counts status updates in n.
func countingStatusWrites(n *atomic.Int32) client.Client {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(wc, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			n.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

func accountObject(ns string) *videogenv1alpha1.PointAccount {
	a := &videogenv1alpha1.PointAccount{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, a)).To(Succeed())
	return a
}
