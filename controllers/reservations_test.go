package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// A REST apiserver replica reserves points in one compare-and-swap and admits tasks under the
// reservation (package reservations); these specs are the manager's half: tasks take their
// price out of the reservation, and a reservation nobody renews returns to the balance.
var _ = Describe("Reservations", func() {
	var stop func()
	var backend *testbackend.Backend
	BeforeEach(func() {
		backend = testbackend.New()
		opts := testOptions(backend)
		opts.ReservationTTL = 4 * time.Second
		stop = startManager(opts)
	})
	AfterEach(func() { stop() })

	reserve := func(ns, name string, amount int64) {
		GinkgoHelper()
		_, err := ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.Reserve(name, amount, amount, false))
		Expect(err).NotTo(HaveOccurred())
	}

	It("moves an admitted task's price out of its reservation, then returns the unrenewed rest", func() {
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		reserve(ns, "r-dead-1", 60)
		expectBalanced(ns, 40, 60, 0)
		// The apiserver created the task and died before moving its points.
		b := aShortTask(ns, tmpl).Reservation("r-dead-1")
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		b.Create()
		// The controller first gives the apiserver 2s to move it (it never will).
		Eventually(func() int64 { return accountOf(ns).Status.Reserved }).Should(Equal(int64(40)), "the task took its 20 from the reservation")
		Expect(accountOf(ns).Status.Balance).To(Equal(int64(40)))
		// Nobody renews it: after the 4s TTL (counted from when the controller first saw it)
		// the rest goes back to the balance, with an event saying so.
		Consistently(func() int { return len(accountOf(ns).Status.Reservations) }, "1s").Should(Equal(1))
		expectBalanced(ns, 80, 20, 0)
		Expect(accountOf(ns).Status.Reservations).To(BeEmpty())
		Eventually(func() []string { return eventReasons(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElement("ReservationExpired"))
		Expect(taskOf(ns, b.Name()).Status.Cost).To(HaveValue(Equal(int64(20))))
	})

	It("freezes from the balance a task whose reservation is gone", func() {
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Reservation("r-released-long-ago")
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		b.Create()
		expectBalanced(ns, 80, 20, 0)
	})

	It("fails, without moving points, a task whose reservation is gone and whose balance is short", func() {
		ns := newAccount(10)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		task := aShortTask(ns, tmpl).Reservation("r-released-long-ago").Create()
		Eventually(func() videogenv1alpha1.TaskPhase { return taskOf(ns, task.Name).Status.Phase }).Should(Equal(videogenv1alpha1.TaskFailed))
		Expect(taskOf(ns, task.Name).Status.Error.Code).To(Equal("insufficient_balance"))
		expectBalanced(ns, 10, 0, 0)
	})

	It("keeps the settlement record of a task it froze itself, so that the apiserver's late move cannot freeze it again", func() {
		ns := newAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		reserve(ns, "r-slow-1", 60)
		// The apiserver admitted the task and its move is late: the controller freezes the
		// price itself after 2s, and the task ends at once.
		task := aShortTask(ns, tmpl).Reservation("r-slow-1").Create()
		done := finished(ns, task.Name)
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionAccepted).Reason).
			To(Equal(videogenv1alpha1.ReasonFrozenByManager))
		// (The reservation's unrenewed rest returns to the balance after the 4s TTL meanwhile.)
		Eventually(func() int64 { return accountOf(ns).Status.Spent }).Should(Equal(int64(20)))
		// Well past the trimming delay the record is still there...
		Consistently(func() int { return len(accountOf(ns).Status.Settlements) }, "3s").Should(Equal(1))
		// ...so the move, when it finally lands, is refused and freezes nothing.
		_, err := ledger.New(k8sClient, k8sClient).Do(ctx, ns, ledger.FreezeFrom(task.Name, 20, "r-slow-1"))
		Expect(err).To(MatchError(ledger.ErrAlreadySettled))
		st := accountOf(ns).Status
		Expect(ledger.Check(&st)).To(Succeed())
		Expect(st.Holds).To(BeEmpty())
		Expect(st.Spent).To(Equal(int64(20)))
	})
})
