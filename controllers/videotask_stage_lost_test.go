package controllers_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The SRE drill: the reference worker keeps its stages in memory, so each rollout forgets the
// stages it ran and the next look at one answers 404. The task has room left before its
// deadline and the stage's key makes Submit idempotent: the stage is submitted again, a
// bounded number of times, and the points move as for any task.
var _ = Describe("A task whose backend lost a running stage", func() {
	var (
		backend *testbackend.Backend
		stop    func()
	)
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
		DeferCleanup(func() { stop() })
	})

	// stageOf is the task's status entry for a stage, as last written.
	stageOf := func(g Gomega, ns, task string, name videogenv1alpha1.StageName) videogenv1alpha1.StageStatus {
		for _, st := range taskOf(ns, task).Status.Stages {
			if st.Name == name {
				return st
			}
		}
		g.Expect(name).To(BeEmpty(), "task %s has no %s stage", task, name)
		return videogenv1alpha1.StageStatus{}
	}
	// runningWithHandle waits until the stage runs at the backend and returns its handle.
	runningWithHandle := func(ns, task string, name videogenv1alpha1.StageName) string {
		GinkgoHelper()
		var handle string
		Eventually(func(g Gomega) {
			st := stageOf(g, ns, task, name)
			g.Expect(st.State).To(Equal(videogenv1alpha1.StageRunning))
			g.Expect(st.Handle).NotTo(BeEmpty())
			handle = st.Handle
		}).Should(Succeed())
		return handle
	}
	// lostNotes are the notes of the task's StageLost events.
	lostNotes := func(ns, task string) []string {
		var notes []string
		for _, n := range eventNotes(ns, task) {
			if note, ok := strings.CutPrefix(n, controllers.EventStageLost+": "); ok {
				notes = append(notes, note)
			}
		}
		return notes
	}

	It("submits it again under its key, and the task succeeds and is charged", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()
		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		lostHandle := runningWithHandle(ns, task.Name, videogenv1alpha1.StageRender)

		backend.Restart() // a worker rollout: it forgets the render it ran
		Eventually(func(g Gomega) {
			st := stageOf(g, ns, task.Name, videogenv1alpha1.StageRender)
			g.Expect(st.Resubmissions).To(Equal(int32(1)))
			g.Expect(st.State).To(Equal(videogenv1alpha1.StageRunning))
			g.Expect(st.Handle).NotTo(BeEmpty())
			g.Expect(st.Handle).NotTo(Equal(lostHandle), "the stage submitted again runs under a new handle")
			g.Expect(st.Message).To(ContainSubstring("submitted again after the backend lost it, 1 of 2"))
		}).Should(Succeed())
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		Expect(backend.Submits(renderKey)).To(Equal(2), "submitted again under the same key")
		Eventually(func() []string { return lostNotes(ns, task.Name) }).Should(Equal([]string{
			"the backend lost the render stage (it may have restarted); submitted it again, 1 of 2"}))

		backend.Set(task.Name, testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed})
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		Expect(done.Status.Result.Metadata).To(HaveKeyWithValue("analyzedFaces", "1"), "the render submitted again got the analyze stage's outputs")
		Expect(done.Status.Stages).To(ConsistOf(
			SatisfyAll(HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("Resubmissions", int32(0))),
			SatisfyAll(HaveField("Name", videogenv1alpha1.StageRender), HaveField("Resubmissions", int32(1)),
				HaveField("State", videogenv1alpha1.StageSucceeded))))
		Consistently(func() []string { return lostNotes(ns, task.Name) }, "300ms").Should(HaveLen(1), "one event for the one loss")
		suite.ExpectBalanced(ns, 70, 0, 30)
	})

	It("fails the task and refunds it when the backend lost the stage a third time", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang})
		task := b.Create()
		analyzeKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageAnalyze)
		runningWithHandle(ns, task.Name, videogenv1alpha1.StageAnalyze)

		for n := int32(1); n <= 2; n++ {
			backend.Restart()
			Eventually(func(g Gomega) {
				st := stageOf(g, ns, task.Name, videogenv1alpha1.StageAnalyze)
				g.Expect(st.Resubmissions).To(Equal(n))
				g.Expect(st.Handle).NotTo(BeEmpty())
			}).Should(Succeed())
		}
		backend.Restart()
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(done.Status.Error.Code).To(Equal("analyze_failed"))
		Expect(done.Status.Error.Message).To(Equal("the backend lost the analyze stage 3 times (it may have restarted)"))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionFailed).Message).To(Equal(done.Status.Error.Message))
		Expect(done.Status.Stages).To(ContainElement(SatisfyAll(
			HaveField("Name", videogenv1alpha1.StageAnalyze), HaveField("State", videogenv1alpha1.StageFailed),
			HaveField("Resubmissions", int32(2)))))
		Expect(backend.Submits(analyzeKey)).To(Equal(3), "the first submission and two more")
		Eventually(func() []string { return lostNotes(ns, task.Name) }).Should(Equal([]string{
			"the backend lost the analyze stage (it may have restarted); submitted it again, 1 of 2",
			"the backend lost the analyze stage (it may have restarted); submitted it again, 2 of 2"}))
		suite.ExpectBalanced(ns, 100, 0, 0)
	})
})
