package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// Free tasks, and a frozen price that outlives its template's.
var _ = Describe("Pricing", func() {
	var (
		backend *testbackend.Backend
		stop    func()
	)
	BeforeEach(func() {
		backend = testbackend.New()
		opts := testOptions(backend)
		opts.Task.DefaultPrice = 0 // --default-price=0: what a template without a price costs
		stop = startManager(opts)
	})
	AfterEach(func() { stop() })

	// Checked, holds: a price of 0 (a template's price: 0, an adjustable template's
	// durationPrices entry of 0, or --default-price=0 for a template without a price) is a free
	// task: an account with no points at all runs it (no 402-like refusal for "0 available"),
	// it holds nothing and is charged 0 (cost 0, Deducted), and the account stays balanced at
	// 0/0/0. Reachable: README says a price is 0 to 1000000000 and --default-price takes 0.
	It("Checked, holds: runs free tasks on an account with no points and charges them 0", func() {
		ns := suite.NewAccount(0)
		flat := aTemplate(videogenv1alpha1.CapabilityShort).Price(0).Create()
		unpriced := aTemplate(videogenv1alpha1.CapabilityShort).Create()
		adjustable := aTemplate(videogenv1alpha1.CapabilityTemplate).Adjustable(1, 10, map[string]int64{"5": 0}).Create()
		tasks := []*videogenv1alpha1.VideoTask{
			aShortTask(ns, flat).Create(),
			aShortTask(ns, unpriced).Create(),
			aShortTask(ns, adjustable).Capability(videogenv1alpha1.CapabilityTemplate).Duration(5).Create(),
			aShortTask(ns, adjustable).Capability(videogenv1alpha1.CapabilityTemplate).Duration(7).Create(), // no entry: the default, 0
		}
		for _, task := range tasks {
			done := finished(ns, task.Name)
			Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%s: %+v", task.Name, done.Status.Error)
			Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
			Expect(done.Status.Cost).To(Equal(ptr.To[int64](0)))
		}
		suite.ExpectBalanced(ns, 0, 0, 0)
	})

	// Checked, holds: the price a task was accepted at stays its price while its template's
	// terms change under it. Interleaving: a kubectl video.template task on an adjustable
	// template (durationPrices {"5": 20}) is accepted at 20 and runs (its analyze stage hangs);
	// the administrator then reprices the template ({"5": 45}, and the range narrowed to
	// [1, 4], leaving 5 out of it); the stage finishes. A reconcile after the change must not
	// re-quote (45, or "duration out of range"): the task succeeds charged 20, and the account
	// shows 80/0/20. Reachable: templates are edited at any time, tasks run for minutes.
	It("Checked, holds: charges the frozen price after the template was repriced while the task ran", func() {
		stop()
		opts := testOptions(backend) // default price 10
		stop = startManager(opts)
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityTemplate).Adjustable(1, 10, map[string]int64{"5": 20}).Create()
		b := aShortTask(ns, tmpl).Capability(videogenv1alpha1.CapabilityTemplate).Duration(5)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		Eventually(func() videogenv1alpha1.TaskPhase { return taskOf(ns, task.Name).Status.Phase }).Should(Equal(videogenv1alpha1.TaskRunning))
		suite.ExpectBalanced(ns, 80, 20, 0)

		t := &videogenv1alpha1.Template{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: tmpl}, t)).To(Succeed())
		t.Spec.DurationPrices = map[string]int64{"3": 45}
		t.Spec.MaxDuration = ptr.To[int32](4)
		Expect(k8sClient.Update(ctx, t)).To(Succeed())
		Eventually(func() string {
			got := &videogenv1alpha1.Template{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: tmpl}, got)).To(Succeed())
			return got.Status.Price
		}).Should(ContainSubstring("3s=45"))

		backend.Set(task.Name, testbackend.Script{})
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", done.Status.Error)
		Expect(done.Status.Cost).To(Equal(ptr.To[int64](20)))
		suite.ExpectBalanced(ns, 80, 0, 20)
	})
})
