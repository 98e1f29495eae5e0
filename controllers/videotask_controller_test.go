package controllers_test

import (
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

var _ = Describe("VideoTask lifecycle", func() {
	var (
		backend *testbackend.Backend
		stop    func()
	)
	BeforeEach(func() {
		backend = testbackend.New()
		stop = startManager(testOptions(backend))
	})
	AfterEach(func() { stop() })

	It("deducts the frozen points when both stages succeed", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		task := aShortTask(ns, tmpl).Create()

		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		Expect(*done.Status.Cost).To(Equal(int64(30)))
		Expect(done.Status.AccountUID).To(Equal(suite.AccountOf(ns).UID), "the account its points were frozen in")
		Expect(done.Status.Progress).To(Equal(int32(100)))
		Expect(done.Status.Result.URL).To(Equal("https://media.example/" + task.Name + ".mp4"))
		Expect(done.Status.Result.Metadata).To(HaveKeyWithValue("analyzedFaces", "1"), "render gets the analyze stage's outputs")
		Expect(done.Status.Stages).To(HaveLen(2))
		for _, st := range done.Status.Stages {
			Expect(st.State).To(Equal(videogenv1alpha1.StageSucceeded))
			Expect(st.Backend).To(Equal("test-backend"))
		}
		Expect(meta.IsStatusConditionTrue(done.Status.Conditions, videogenv1alpha1.ConditionAccepted)).To(BeTrue())
		succeeded := meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionSucceeded)
		Expect(succeeded.Status).To(Equal(metav1.ConditionTrue))
		Expect(succeeded.Reason).To(Equal(videogenv1alpha1.ReasonSucceeded))
		Expect(succeeded.ObservedGeneration).To(Equal(done.Generation))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionFailed)).To(BeNil())
		suite.ExpectBalanced(ns, 70, 0, 30)
		Expect(metricValue("videogen_points_moved_total", map[string]string{"namespace": ns, "operation": "deduct"})).To(Equal(30.0))
		Expect(metricValue("videogen_points_moved_total", map[string]string{"namespace": ns, "operation": "freeze"})).To(Equal(30.0))
		Expect(metricValue("videogen_tasks_finished_total", map[string]string{"capability": "video.short", "outcome": "succeeded"})).
			To(BeNumerically(">=", 1))
		Eventually(func() float64 {
			return metricValue("videogen_account_points", map[string]string{"namespace": ns, "state": "spent"})
		}).Should(Equal(30.0))
		// Settled and without a webhook: closed, so it leaves the manager's cache and videogen_tasks,
		// which counts open tasks (a running one, here).
		Eventually(func() bool { return taskOf(ns, task.Name).Status.Closed }).Should(BeTrue())
		running := aShortTask(ns, tmpl)
		backend.Set(running.Name(), testbackend.Script{Analyze: testbackend.Hang})
		running.Create()
		Eventually(func() float64 {
			return metricValue("videogen_tasks", map[string]string{"capability": "video.short", "phase": "Running"})
		}).Should(BeNumerically(">=", 1))
		// kubectl describe tells the story, each step once, all Normal.
		Eventually(func() []string { return eventNotes(ns, task.Name) }).Should(ConsistOf(
			videogenv1alpha1.ReasonFrozen+": Froze 30 points",
			controllers.EventStageStarted+": test-backend started the analyze stage",
			controllers.EventStageStarted+": test-backend started the render stage",
			controllers.EventSucceeded+": Generation finished: https://media.example/"+task.Name+".mp4; deducted 30 points",
		))
		for _, e := range eventsAbout(ns, task.Name) {
			Expect(e.Type).To(Equal("Normal"), e.Reason)
		}
		Consistently(func() []string { return eventNotes(ns, task.Name) }, "1s").Should(HaveLen(4), "no step is told twice")
	})

	It("tells only failures when task events are off (--task-events=false)", func() {
		stop() // this spec's own manager
		opts := testOptions(backend)
		opts.Task.TransitionEvents = false
		stop = startManager(opts)
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		ok := aShortTask(ns, tmpl).Create()
		bad := aShortTask(ns, tmpl)
		backend.Set(bad.Name(), testbackend.Script{Render: testbackend.Fail})
		bad.Create()

		Expect(finished(ns, ok.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Expect(finished(ns, bad.Name()).Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Eventually(func() []string { return eventReasons(ns, bad.Name()) }).Should(ConsistOf(videogenv1alpha1.ReasonStageFailed))
		suite.ExpectBalanced(ns, 70, 0, 30) // both settled: an event would have been sent by now
		Consistently(func() []string { return eventNotes(ns, ok.Name) }, "1s").Should(BeEmpty())
	})

	It("cancels the backend work of a running task that is deleted, and refunds it", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()
		Eventually(func(g Gomega) {
			t := taskOf(ns, task.Name)
			g.Expect(t.Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork), "a stage runs at the backend")
			g.Expect(t.Status.Stages).To(ContainElement(HaveField("State", videogenv1alpha1.StageRunning)))
		}).Should(Succeed())
		suite.ExpectBalanced(ns, 70, 30, 0)

		Expect(k8sClient.Delete(ctx, task)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}))
		}).Should(BeTrue())
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender))).To(BeTrue())
		suite.ExpectBalanced(ns, 100, 0, 0)
		// The task was the only record of its hold: the account says where the points went.
		Eventually(func() []string { return eventNotes(ns, videogenv1alpha1.PointAccountName) }).Should(ContainElement(
			controllers.EventHoldReleased + ": Task " + task.Name + " was deleted before it ended (Running): the 30 points it held are available again; nothing was charged"))
	})

	It("lets a deleted task go after the cancel grace when its backend cannot be reached", func() {
		stop()
		opts := testOptions(backend)
		opts.Task.CancelGrace = 2 * time.Second
		stop = startManager(opts)
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		b := aShortTask(ns, tmpl)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Hang, CancelFails: true})
		task := b.Create()
		Eventually(func() []string { return taskOf(ns, task.Name).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		Expect(k8sClient.Delete(ctx, task)).To(Succeed())
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
		}, "1s").Should(Succeed(), "it waits for the backend to cancel, within the grace")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}))
		}).Should(BeTrue())
		Eventually(func() []string { return eventReasons(ns, task.Name) }).Should(ContainElement("CancelFailed"))
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	It("takes its finalizer off a task once no stage runs, and a fast task never gets one", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		slow := aShortTask(ns, tmpl)
		backend.Set(slow.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Succeed, Latency: time.Second})
		slow.Create()
		Eventually(func() []string { return taskOf(ns, slow.Name()).Finalizers }).Should(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		Expect(finished(ns, slow.Name()).Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		Eventually(func() []string { return taskOf(ns, slow.Name()).Finalizers }).Should(BeEmpty())
		fast := aShortTask(ns, tmpl).Create()
		Expect(finished(ns, fast.Name).Finalizers).To(BeEmpty())
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	DescribeTable("refunds the frozen points when a stage fails",
		func(s testbackend.Script, code string) {
			ns := suite.NewAccount(100)
			tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(40).Create()
			b := aShortTask(ns, tmpl)
			backend.Set(b.Name(), s)
			b.Create()

			done := finished(ns, b.Name())
			Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
			Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
			Expect(done.Status.Error.Code).To(Equal(code))
			Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionFailed).Reason).
				To(Equal(videogenv1alpha1.ReasonStageFailed))
			Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionSucceeded)).To(BeNil(),
				"kubectl wait --for=condition=Succeeded must never end for a failed task")
			Expect(done.Status.Result).To(BeNil())
			suite.ExpectBalanced(ns, 100, 0, 0)
			Eventually(func() []string { return eventNotes(ns, b.Name()) }).Should(ContainElement(
				MatchRegexp(`^StageFailed: .+; refunded 40 points$`)))
		},
		Entry("in phase 1 (analyze)", testbackend.Script{Analyze: testbackend.Fail}, "analyze_failed"),
		Entry("in phase 2 (render)", testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Fail}, "render_failed"),
		Entry("when the backend refuses phase 2", testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Refuse}, "render_failed"),
	)

	It("fails a task that exceeds its timeout, cancels its backend work and refunds it", func() {
		ns := suite.NewAccount(50)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		// Long enough for the account's summary to show the hold on a loaded machine before the
		// timeout refunds it.
		b := aShortTask(ns, tmpl).Timeout(6 * time.Second)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()

		Eventually(func() int64 { return suite.AccountOf(ns).Status.Frozen }).Should(Equal(int64(20)))
		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Error.Code).To(Equal("timed_out"))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionFailed).Reason).
			To(Equal(videogenv1alpha1.ReasonTimedOut))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionSucceeded)).To(BeNil())
		Expect(done.Status.Charge).To(Equal(videogenv1alpha1.ChargeRefunded))
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(done.UID), videogenv1alpha1.StageRender))).To(BeTrue())
		suite.ExpectBalanced(ns, 50, 0, 0)
	})

	It("gives every stage its task's deadline, with a minute's grace, so a lost cancel cannot leave work running", func() {
		ns := suite.NewAccount(50)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(20).Create()
		b := aShortTask(ns, tmpl).Timeout(10 * time.Minute)
		backend.Set(b.Name(), testbackend.Script{Analyze: testbackend.Succeed, Render: testbackend.Hang})
		task := b.Create()

		renderKey := generation.WorkKey(ns, task.Name, string(task.UID), videogenv1alpha1.StageRender)
		Eventually(func() int { return backend.Submits(renderKey) }).Should(BeNumerically(">=", 1))
		// The task's deadline is its creation plus its timeout; the controller's own timeout
		// comes a minute before the backend's.
		want := task.CreationTimestamp.Add(10*time.Minute + time.Minute)
		for _, stage := range videogenv1alpha1.Stages {
			key := generation.WorkKey(ns, task.Name, string(task.UID), stage)
			Expect(backend.Deadline(key)).To(BeTemporally("==", want), "the %s stage's deadline", stage)
		}
	})

	It("stops the backend's work of a task whose template is deleted mid-task, and refunds it", func() {
		ns := suite.NewAccount(50)
		task, tmpl := aRunningTask(backend, ns, 20)

		Expect(k8sClient.Delete(ctx, &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: tmpl}})).To(Succeed())
		done := finished(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("template_unavailable"))
		Expect(done.Status.Ending()).To(HaveField("Reason", videogenv1alpha1.ReasonTemplateUnavailable), "the REASON column says why")
		Expect(done.Status.Error.Message).To(ContainSubstring("template went away after the task was accepted"))
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(done.UID), videogenv1alpha1.StageAnalyze))).To(BeTrue())
		for _, st := range done.Status.Stages {
			Expect(st.State).NotTo(Equal(videogenv1alpha1.StageRunning), "stage %s of an ended task", st.Name)
		}
		suite.ExpectBalanced(ns, 50, 0, 0)
	})

	It("cancels on request and refunds", func() {
		ns := suite.NewAccount(50)
		task, _ := aRunningTask(backend, ns, 20)

		patch := client.MergeFrom(task.DeepCopy())
		task.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
		Expect(k8sClient.Patch(ctx, task, patch)).To(Succeed())

		done := finished(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("canceled"))
		Expect(backend.WasCanceled(generation.WorkKey(ns, task.Name, string(done.UID), videogenv1alpha1.StageAnalyze))).To(BeTrue())
		suite.ExpectBalanced(ns, 50, 0, 0)
	})

	// The ledger reads a task's points from its status (a settled charge or a terminal phase ends
	// its hold), so an edit of the status by hand (kubectl edit --subresource=status) that would
	// end a task, settle its points or change its price is refused, saying how to stop a task.
	It("refuses a status edit that would end a task or move its points, and the books stay right", func() {
		ns := suite.NewAccount(50)
		task, _ := aRunningTask(backend, ns, 20)
		refused := func(message string, edit func(*videogenv1alpha1.VideoTaskStatus)) {
			GinkgoHelper()
			Eventually(func(g Gomega) { // a conflict with the controller's own write is tried again
				t := taskOf(ns, task.Name)
				edit(&t.Status)
				err := k8sClient.Status().Update(ctx, t)
				g.Expect(err).To(HaveOccurred())
				g.Expect(err.Error()).To(ContainSubstring(message))
			}).Should(Succeed())
		}
		refused("cost is the price the task was accepted at", func(st *videogenv1alpha1.VideoTaskStatus) { st.Cost = ptr.To[int64](1) })
		refused("only the controller settles a task's points", func(st *videogenv1alpha1.VideoTaskStatus) {
			st.Charge = videogenv1alpha1.ChargeDeducted
		})
		refused("only the controller ends a task", func(st *videogenv1alpha1.VideoTaskStatus) { st.Phase = videogenv1alpha1.TaskFailed })
		refused("only the controller ends a task", func(st *videogenv1alpha1.VideoTaskStatus) { st.Phase = videogenv1alpha1.TaskSucceeded })
		refused("cancel it (annotation videogen.dev/cancel-requested=true)", func(st *videogenv1alpha1.VideoTaskStatus) {
			st.Phase = videogenv1alpha1.TaskFailed
		})
		refused("only a finished task (Succeeded or Failed) is closed", func(st *videogenv1alpha1.VideoTaskStatus) { st.Closed = true })
		Expect(taskOf(ns, task.Name).Status.Phase).To(Equal(videogenv1alpha1.TaskRunning))
		suite.ExpectBalanced(ns, 30, 20, 0)

		patch := client.MergeFrom(task.DeepCopy())
		task.Annotations = map[string]string{videogenv1alpha1.AnnotationCancelRequested: "true"}
		Expect(k8sClient.Patch(ctx, task, patch)).To(Succeed())
		finished(ns, task.Name)
		refused("a finished task's phase (Succeeded or Failed) never changes", func(st *videogenv1alpha1.VideoTaskStatus) {
			st.Phase = videogenv1alpha1.TaskRunning
		})
		suite.ExpectBalanced(ns, 50, 0, 0)
	})

	It("fails with InsufficientBalance and moves no points when the balance is short", func() {
		failedShort := map[string]string{"capability": string(videogenv1alpha1.CapabilityShort), "outcome": "failed"}
		finishedBefore := metricValue("videogen_tasks_finished_total", failedShort)
		timedBefore := histogramCount("videogen_task_duration_seconds", failedShort)
		ns := suite.NewAccount(25)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(30).Create()
		task := aShortTask(ns, tmpl).Create()

		done := finished(ns, task.Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskFailed))
		Expect(done.Status.Charge).To(BeEmpty())
		Expect(done.Status.AccountUID).To(BeEmpty(), "it never held points")
		Expect(done.Status.Error.Code).To(Equal("insufficient_balance"))
		Expect(done.Status.Error.Message).To(ContainSubstring("top-up"))
		Expect(meta.FindStatusCondition(done.Status.Conditions, videogenv1alpha1.ConditionAccepted).Reason).
			To(Equal(videogenv1alpha1.ReasonInsufficientBalance))
		Consistently(func() []int64 {
			st := suite.AccountOf(ns).Status
			return []int64{st.Balance, st.Frozen, st.Spent, int64(st.Holds)}
		}, time.Second).Should(Equal([]int64{25, 0, 0, 0}))
		Eventually(func() []string { return eventReasons(ns, task.Name) }).Should(ContainElement(videogenv1alpha1.ReasonInsufficientBalance))
		// A task refused at admission ends too: the duration histogram counts every end that
		// videogen_tasks_finished_total counts (it counted none of the refused ones).
		Eventually(func(g Gomega) {
			finished := metricValue("videogen_tasks_finished_total", failedShort) - finishedBefore
			g.Expect(finished).To(BeNumerically(">=", 1))
			g.Expect(float64(histogramCount("videogen_task_duration_seconds", failedShort) - timedBefore)).To(Equal(finished))
		}).Should(Succeed())
	})

	// A kubectl user whose namespace is no account is told what is missing and what to do.
	It("fails a task in a namespace without a PointAccount saying which object to create", func() {
		ns := envsuite.Unique("noacct")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		task := aShortTask(ns, aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()).Create()

		done := finished(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("account_not_found"))
		Expect(done.Status.Error.Message).To(And(ContainSubstring("PointAccount"), ContainSubstring(`"default"`),
			ContainSubstring(ns), ContainSubstring("PointTopUp")))
	})

	It("prices adjustable templates by duration and refuses a duration out of range without moving points", func() {
		ns := suite.NewAccount(500)
		tmpl := aTemplate(videogenv1alpha1.CapabilityTemplate).Adjustable(5, 30, map[string]int64{"10": 90}).Create()

		priced := aShortTask(ns, tmpl).Capability(videogenv1alpha1.CapabilityTemplate).Duration(10).Create()
		defaulted := aShortTask(ns, tmpl).Capability(videogenv1alpha1.CapabilityTemplate).Duration(12).Create()
		outOfRange := aShortTask(ns, tmpl).Capability(videogenv1alpha1.CapabilityTemplate).Duration(31).Create()

		Expect(*finished(ns, priced.Name).Status.Cost).To(Equal(int64(90)))
		Expect(*finished(ns, defaulted.Name).Status.Cost).To(Equal(int64(10)), "the system default price")
		bad := finished(ns, outOfRange.Name)
		Expect(bad.Status.Error.Code).To(Equal("invalid_duration"))
		Expect(bad.Status.Cost).To(BeNil())
		suite.ExpectBalanced(ns, 400, 0, 100)
	})

	It("fails a task whose template does not exist without moving points", func() {
		ns := suite.NewAccount(100)
		task := aShortTask(ns, "no-such-template").Create()
		done := finished(ns, task.Name)
		Expect(done.Status.Error.Code).To(Equal("template_not_found"))
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	It("runs a task on the account's own ushort_ template", func() {
		ns := suite.NewAccount(100)
		st := &videogenv1alpha1.ShortTemplate{}
		st.Namespace, st.Name = ns, "my-template"
		st.Spec = videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://media.example/mine.mp4"}
		Expect(k8sClient.Create(ctx, st)).To(Succeed())
		var id string
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
			id = st.Status.ID
			g.Expect(id).To(HavePrefix(videogenv1alpha1.ShortTemplateIDPrefix))
			g.Expect(st.Labels).To(HaveKeyWithValue(videogenv1alpha1.LabelShortTemplateID, id))
			g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, videogenv1alpha1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())

		done := finished(ns, aShortTask(ns, id).Create().Name)
		Expect(done.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded))
		suite.ExpectBalanced(ns, 90, 0, 10)

		// Its object name works as well, as kubectl users refer to objects.
		byName := finished(ns, aShortTask(ns, st.Name).Create().Name)
		Expect(byName.Status.Phase).To(Equal(videogenv1alpha1.TaskSucceeded), "%+v", byName.Status.Error)
		suite.ExpectBalanced(ns, 80, 0, 20)

		// Another account cannot use it, by id or by name: they do not cross namespaces.
		other := suite.NewAccount(100)
		for _, ref := range []string{id, st.Name} {
			foreign := finished(other, aShortTask(other, ref).Create().Name)
			Expect(foreign.Status.Error.Code).To(Equal("template_not_found"))
		}
		suite.ExpectBalanced(other, 100, 0, 0)
	})

	It("keeps a ushort_ id stable for the template's life and unique in the account", func() {
		ns := suite.NewAccount(0)
		mine := &videogenv1alpha1.ShortTemplate{}
		mine.Namespace, mine.Name = ns, "mine"
		mine.Spec = videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://media.example/mine.mp4"}
		Expect(k8sClient.Create(ctx, mine)).To(Succeed())
		id := controllers.ShortTemplateID(mine.UID)
		labelOf := func(st *videogenv1alpha1.ShortTemplate) func(Gomega) string {
			return func(g Gomega) string {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
				return st.Labels[videogenv1alpha1.LabelShortTemplateID]
			}
		}
		Eventually(func(g Gomega) string { labelOf(mine)(g); return mine.Status.ID }).Should(Equal(id))

		// An edited label is put back, and so is a removed one.
		mine.Labels[videogenv1alpha1.LabelShortTemplateID] = "ushort_somethingelse"
		Expect(k8sClient.Update(ctx, mine)).To(Succeed())
		Eventually(labelOf(mine)).Should(Equal(id))
		Eventually(func() []string { return eventReasons(ns, mine.Name) }).Should(ContainElement("IDKept"))
		delete(mine.Labels, videogenv1alpha1.LabelShortTemplateID)
		Expect(k8sClient.Update(ctx, mine)).To(Succeed())
		Eventually(labelOf(mine)).Should(Equal(id))
		Expect(mine.Status.ID).To(Equal(id))

		// A second template created with the same id gets one of its own.
		copycat := &videogenv1alpha1.ShortTemplate{}
		copycat.Namespace, copycat.Name = ns, "copycat"
		copycat.Labels = map[string]string{videogenv1alpha1.LabelShortTemplateID: id}
		copycat.Spec = videogenv1alpha1.ShortTemplateSpec{DisplayName: "Copy", TargetURL: "https://media.example/copy.mp4"}
		Expect(k8sClient.Create(ctx, copycat)).To(Succeed())
		Eventually(labelOf(copycat)).Should(Equal(controllers.ShortTemplateID(copycat.UID)))
		Eventually(func(g Gomega) string { labelOf(copycat)(g); return copycat.Status.ID }).Should(Equal(controllers.ShortTemplateID(copycat.UID)))
		found, err := catalog.FindShortTemplate(ctx, k8sClient, ns, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(found.Name).To(Equal("mine"))
	})
})

var _ = Describe("Finished tasks", func() {
	It("are deleted after the finished-task TTL", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Task.FinishedTTL = 2 * time.Second
		stop := startManager(opts)
		defer stop()

		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		task := aShortTask(ns, tmpl).Create()
		finished(ns, task.Name)
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		suite.ExpectBalanced(ns, 90, 0, 10)
	})

	It("are closed in their settling write, and the collector deletes only closed ones", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Task.FinishedTTL = 2 * time.Second
		opts.Webhooks.Schedule = []time.Duration{time.Hour} // the failing receiver is retried much later
		stop := startManager(opts)
		defer stop()

		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		plain := aShortTask(ns, tmpl).Create()
		failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer failing.Close()
		hooked := taskWithWebhook(ns, failing.URL, testbackend.Script{}, backend)

		// Settled and closed in one write: the field selector the manager's cache uses finds it.
		Eventually(func(g Gomega) {
			var closed videogenv1alpha1.VideoTaskList
			g.Expect(k8sClient.List(ctx, &closed, client.InNamespace(ns),
				client.MatchingFields{videogenv1alpha1.FieldStatusClosed: "true"})).To(Succeed())
			g.Expect(closed.Items).To(HaveLen(1))
			g.Expect(closed.Items[0].Name).To(Equal(plain.Name))
			g.Expect(closed.Items[0].Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		}).Should(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(plain), &videogenv1alpha1.VideoTask{}))
		}).Should(BeTrue())

		// The task whose webhook is still being retried stays open, past its TTL.
		Eventually(func() int32 {
			if w := webhookOf(ns, hooked.Name); w != nil {
				return w.Attempts
			}
			return 0
		}).Should(Equal(int32(1)))
		Consistently(func(g Gomega) {
			t := taskOf(ns, hooked.Name)
			g.Expect(t.Status.Closed).To(BeFalse())
			g.Expect(t.Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		}, 4*time.Second).Should(Succeed())
		suite.ExpectBalanced(ns, 80, 0, 20)
	})

	It("are collected page by page: closed and past the TTL only", func() {
		ns := suite.NewAccount(0) // no points: no manager runs in this spec
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		// No manager runs: the statuses are set here, as a manager would have left them.
		setStatus := func(closed bool, completedAgo time.Duration) *videogenv1alpha1.VideoTask {
			t := aShortTask(ns, tmpl).Create()
			at := metav1.NewTime(time.Now().Add(-completedAgo))
			t.Status.Phase, t.Status.Charge, t.Status.CompletedAt, t.Status.Closed =
				videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, &at, closed
			t.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"}
			Expect(k8sClient.Status().Update(ctx, t)).To(Succeed())
			return t
		}
		var old []*videogenv1alpha1.VideoTask
		for range 5 {
			old = append(old, setStatus(true, 2*time.Hour))
		}
		recent := setStatus(true, 10*time.Minute)
		open := setStatus(false, 2*time.Hour) // e.g. its webhook is still retried

		deleted, next, err := controllers.SweepFinishedTasks(ctx, k8sClient, time.Hour, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(deleted).To(BeNumerically(">=", 5)) // other specs' closed tasks may be past an hour too
		Expect(next).To(BeNumerically("~", 50*time.Minute, time.Minute))
		for _, t := range old {
			Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), &videogenv1alpha1.VideoTask{}))).To(BeTrue(), t.Name)
		}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(recent), &videogenv1alpha1.VideoTask{})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(open), &videogenv1alpha1.VideoTask{})).To(Succeed())
	})

	It("found by a restarted manager are still deleted at their TTL", func() {
		backend := testbackend.New()
		opts := testOptions(backend)
		opts.Task.FinishedTTL = 3 * time.Second
		stop := startManager(opts)
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(10).Create()
		task := aShortTask(ns, tmpl).Create()
		Expect(finished(ns, task.Name).Status.Charge).To(Equal(videogenv1alpha1.ChargeDeducted))
		stop()

		// The new manager's initial list schedules the task for its TTL instead of now.
		stop = startManager(opts)
		defer stop()
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		suite.ExpectBalanced(ns, 90, 0, 10)
	})
})

func eventReasons(ns, regarding string) []string {
	var reasons []string
	for _, e := range eventsAbout(ns, regarding) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// eventNotes lists "reason: note" of the events about regarding.
func eventNotes(ns, regarding string) []string {
	var notes []string
	for _, e := range eventsAbout(ns, regarding) {
		notes = append(notes, e.Reason+": "+e.Note)
	}
	return notes
}

func eventsAbout(ns, regarding string) []eventsv1.Event {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var about []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == regarding {
			about = append(about, e)
		}
	}
	return about
}

// metricSeries counts the samples of a metric in the manager's registry whose labels include
// want.
func metricSeries(name string, want map[string]string) int {
	return len(metricSamples(name, want))
}

// metricValue sums the samples of a counter or gauge in the manager's registry whose labels
// include want.
func metricValue(name string, want map[string]string) float64 {
	var total float64
	for _, m := range metricSamples(name, want) {
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// histogramCount sums the sample counts of a histogram in the manager's registry whose labels
// include want.
func histogramCount(name string, want map[string]string) uint64 {
	var total uint64
	for _, m := range metricSamples(name, want) {
		total += m.GetHistogram().GetSampleCount()
	}
	return total
}

// metricSamples are the samples of a metric in the manager's registry whose labels include want.
func metricSamples(name string, want map[string]string) []*dto.Metric {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue samples
				}
			}
			out = append(out, m)
		}
	}
	return out
}
