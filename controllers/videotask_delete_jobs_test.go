package controllers_test

import (
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// The VideoTask controller and the Job backend.
var _ = Describe("A deleted task's Jobs", func() {
	var (
		stop        func()
		jobsNS      string
		afterSubmit func(generation.Work)
	)
	BeforeEach(func() {
		// docs/deploy.md: where the account's users may not run Jobs, the Job backend gets a
		// namespace of its own. Owner references cannot cross namespaces, so there the Jobs
		// are cleaned up only by Cancel (and their TTL once finished): the garbage collector
		// does not delete them with their task.
		jobsNS = envsuite.Unique("jobs")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jobsNS}})).To(Succeed())
		cfg, err := jobbackend.ParseConfig([]byte(jobtest.Config + "namespace: " + jobsNS + "\n"))
		Expect(err).NotTo(HaveOccurred())
		jobs, err := jobbackend.New(k8sClient, cfg)
		Expect(err).NotTo(HaveOccurred())
		afterSubmit = func(generation.Work) {}
		opts := testOptions(nil)
		backend := &hookedBackend{Backend: jobs, after: func(w generation.Work) { afterSubmit(w) }}
		opts.Backends = generation.Routes{videogenv1alpha1.CapabilityShort: generation.Named{Name: "jobs", Backend: backend}}
		stop = startManager(opts)
	})
	AfterEach(func() { stop() })

	stageJob := func(task string, stage videogenv1alpha1.StageName) *batchv1.Job {
		GinkgoHelper()
		var job batchv1.Job
		Eventually(func(g Gomega) {
			var list batchv1.JobList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(jobsNS),
				client.MatchingLabels{jobbackend.LabelTask: task, jobbackend.LabelStage: string(stage)})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			job = list.Items[0]
		}).Should(Succeed())
		return &job
	}

	// What breaks: finalize (the FinalizerCancelWork path of a deleted task) cancels only the
	// stages its status says run with a handle. A stage whose Submit reached the backend but
	// whose handle never reached the status is skipped: its Job is never deleted. advance's
	// own "no handle yet" branch and backendError both ask the backend to stop such work by
	// its key (the Job backend finds the Job by it); finalize does not.
	//
	// Steps, each a real reconcile against envtest, forced in this order:
	//  1. A task's analyze Job runs (handle recorded, FinalizerCancelWork added).
	//  2. The analyze Job completes; the next poll sees it and submits the render stage: the
	//     render Job is created.
	//  3. Meanwhile the user deletes the task (kubectl delete videotask, as its docs allow at
	//     any time): its deletionTimestamp is set, the finalizer holds it.
	//  4. The reconcile's status write (analyze Succeeded, render Running with its handle)
	//     conflicts with the deletion and is lost.
	//  5. The next reconcile finalizes the task: the status it reads says analyze runs (its
	//     Job is deleted) and render is Pending with no handle: skipped. The finalizer comes
	//     off and the task goes.
	//
	// Reachable: step 3 needs only a delete between the reconcile's read and its status write
	// (the render's Submit and first look take a Job create and two reads); any write of the
	// task there (a label, the cancel request) loses the handle the same way, and a manager
	// crash between the Job's create and the status write does too. The user sees nothing; the
	// operator's GPU pod renders for a task that no longer exists, up to the task's timeout
	// plus a minute (its activeDeadlineSeconds), and its finished Job stays for its TTL.
	It("deletes the render Job whose handle a deletion kept out of the status", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		var once sync.Once
		afterSubmit = func(w generation.Work) {
			if w.Namespace != ns || w.Stage != videogenv1alpha1.StageRender {
				return // earlier specs' open tasks are routed here too
			}
			once.Do(func() {
				defer GinkgoRecover()
				// 3. The user deletes the task while its render Job is being created.
				Expect(k8sClient.Delete(ctx, &videogenv1alpha1.VideoTask{
					ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Task}})).To(Succeed())
			})
		}
		task := aShortTask(ns, tmpl).Create()

		// 1–2. The analyze Job runs, then completes with its outputs.
		analyze := stageJob(task.Name, videogenv1alpha1.StageAnalyze)
		Eventually(func(g Gomega) {
			g.Expect(taskOf(ns, task.Name).Finalizers).To(ContainElement(videogenv1alpha1.FinalizerCancelWork))
		}).Should(Succeed())
		succeedJobPod(analyze, `{"outputs":{"face_box":"{}"}}`)
		Expect(jobtest.Complete(ctx, k8sClient, analyze)).To(Succeed())

		// 4–5. The render Job was created; the task goes.
		render := stageJob(task.Name, videogenv1alpha1.StageRender)
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
		}).Should(Satisfy(apierrors.IsNotFound))

		// finalize deleted the Job of the stage its status said runs (analyze)...
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(analyze), &batchv1.Job{})
		}).Should(Satisfy(apierrors.IsNotFound))
		// ...and the render Job must go with it too.
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(render), &batchv1.Job{})
		}).Should(Satisfy(apierrors.IsNotFound), "the render Job of a deleted task is left running")
		suite.ExpectBalanced(ns, 100, 0, 0)
	})

	// What breaks: a task carries FinalizerCancelWork only once a stage's handle is in its
	// status (guardWork, after the status write). A task deleted between its first stage's
	// Submit and that write has no finalizer: it goes at once, the status write answers
	// NotFound, and nothing stops the work the Submit started. guardWork's own "deleted since
	// the stage started" branch cancels it, but is never reached: advance returns the write's
	// error first.
	//
	// Steps, each a real reconcile against envtest, forced in this order:
	//  1. A task is admitted; its reconcile submits the analyze stage: its Job is created.
	//  2. Meanwhile the user deletes the task (kubectl delete, right after kubectl apply: a
	//     wrong template, say): no finalizer, so it is gone at once.
	//  3. The reconcile's status write (analyze Running, its handle) answers NotFound.
	//
	// Reachable: the window is the Job's create and one read, on every task's first reconcile.
	// The user sees nothing (the task is gone and its hold with it); the operator's GPU pod
	// runs for nobody up to the task's timeout plus a minute, and the Job stays for its TTL.
	// (In the task's own namespace the garbage collector deletes the Job with its owner; the
	// HTTP backend's worker, which has no owner references, runs such a stage to its deadline
	// in either case: this reconcile holds its handle, and only this reconcile does.)
	It("stops the analyze Job of a task deleted before the Job's handle was written", func() {
		ns := suite.NewAccount(100)
		tmpl := aTemplate(videogenv1alpha1.CapabilityShort).Price(25).Create()
		var (
			once    sync.Once
			analyze = make(chan client.ObjectKey, 1)
		)
		afterSubmit = func(w generation.Work) {
			if w.Namespace != ns {
				return // earlier specs' open tasks are routed here too: only this spec's is deleted
			}
			once.Do(func() {
				defer GinkgoRecover()
				analyze <- client.ObjectKey{Namespace: jobsNS, Name: jobbackend.JobName(w.Key, w.Stage)}
				// 2. The user deletes the task while its analyze Job is being created.
				Expect(k8sClient.Delete(ctx, &videogenv1alpha1.VideoTask{
					ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Task}})).To(Succeed())
			})
		}
		task := aShortTask(ns, tmpl).Create()
		var job client.ObjectKey
		Eventually(analyze).Should(Receive(&job)) // 1. its Job was created
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{})
		}).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() error {
			return k8sClient.Get(ctx, job, &batchv1.Job{})
		}).Should(Satisfy(apierrors.IsNotFound), "the analyze Job of a deleted task is left running")
		suite.ExpectBalanced(ns, 100, 0, 0)
	})
})

// succeedJobPod creates the pod the Job controller would have run for job, Succeeded, with
// message as its result container's termination message.
func succeedJobPod(job *batchv1.Job, message string) {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-p", Labels: job.Spec.Template.Labels},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodSucceeded
	for _, ctr := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: "sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", Message: message, ContainerID: "containerd://" + pod.Name}},
		})
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}
