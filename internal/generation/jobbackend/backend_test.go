package jobbackend_test

import (
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
)

var _ = Describe("the Job backend", func() {
	var (
		ns      string
		task    *videogenv1alpha1.VideoTask
		backend *jobbackend.Backend
	)

	BeforeEach(func() {
		ns = newNamespace()
		task = newTask(ns, "first-short")
		backend = newBackend(k8sClient, "")
	})

	submit := func(stage videogenv1alpha1.StageName) (generation.Work, string, *batchv1.Job) {
		w := workFor(task, stage)
		handle, err := backend.Submit(ctx, w)
		Expect(err).NotTo(HaveOccurred())
		return w, handle, getJob(handle)
	}

	Describe("Submit", func() {
		It("creates a Job owned by the VideoTask, labelled with the task, stage and capability", func() {
			_, handle, job := submit(videogenv1alpha1.StageAnalyze)

			Expect(handle).To(Equal(ns + "/" + jobbackend.JobName(workFor(task, videogenv1alpha1.StageAnalyze).Key, "analyze")))
			Expect(job.OwnerReferences).To(HaveLen(1))
			owner := job.OwnerReferences[0]
			Expect(owner.APIVersion).To(Equal("videogen.dev/v1alpha1"))
			Expect(owner.Kind).To(Equal("VideoTask"))
			Expect(owner.Name).To(Equal(task.Name))
			Expect(owner.UID).To(Equal(task.UID))
			Expect(*owner.Controller).To(BeTrue())
			Expect(*owner.BlockOwnerDeletion).To(BeTrue())

			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelTask, task.Name))
			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelTaskUID, string(task.UID)))
			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelStage, "analyze"))
			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelCapability, "video.short"))
			Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(jobbackend.LabelStage, "analyze"))
		})

		It("gives the pod the inputs as env and the configured limits", func() {
			_, _, job := submit(videogenv1alpha1.StageRender)

			Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(jobbackend.DefaultActiveDeadlineSeconds))
			Expect(*job.Spec.BackoffLimit).To(Equal(jobbackend.DefaultBackoffLimit))
			// Owned by its task, the Job goes with it: no TTL deletes it before it is read.
			Expect(job.Spec.TTLSecondsAfterFinished).To(BeNil())
			// Exit code 2 (the input is unusable) fails the Job at once instead of retrying it;
			// a pod evicted or preempted (DisruptionTarget) does not count as a failure.
			rules := job.Spec.PodFailurePolicy.Rules
			Expect(rules).To(HaveLen(2))
			Expect(rules[0].Action).To(Equal(batchv1.PodFailurePolicyActionFailJob))
			Expect(rules[0].OnExitCodes.Operator).To(Equal(batchv1.PodFailurePolicyOnExitCodesOpIn))
			Expect(rules[0].OnExitCodes.Values).To(Equal([]int32{2}))
			Expect(rules[1].Action).To(Equal(batchv1.PodFailurePolicyActionIgnore))
			Expect(rules[1].OnPodConditions).To(ConsistOf(batchv1.PodFailurePolicyOnPodConditionsPattern{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}))
			pod := job.Spec.Template.Spec
			Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			ctr := pod.Containers[0]
			Expect(ctr.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError))
			Expect(ctr.Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
			env := map[string]string{}
			for _, e := range ctr.Env {
				env[e.Name] = e.Value
			}
			Expect(env).To(Equal(map[string]string{
				"VIDEOGEN_NAMESPACE":               ns,
				"VIDEOGEN_TASK":                    task.Name,
				"VIDEOGEN_TASK_UID":                string(task.UID),
				"VIDEOGEN_STAGE":                   "render",
				"VIDEOGEN_CAPABILITY":              "video.short",
				"VIDEOGEN_TEMPLATE_ID":             "beach-dance",
				"VIDEOGEN_TEMPLATE_MEDIA_URL":      "https://media.example.com/templates/beach-dance.mp4",
				"VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL": "true",
				"VIDEOGEN_FACE_IMAGE_URL":          "https://media.example.com/face.jpg",
				"VIDEOGEN_FACE_IMAGE_UPLOADED":     "",
				"VIDEOGEN_SOURCE_VIDEO_URL":        "",
				"VIDEOGEN_DURATION":                "",
				"VIDEOGEN_PREVIOUS":                `{"faces":"1"}`,
				"VIDEOGEN_POD_NAME":                "",
				"VIDEOGEN_POD_NAMESPACE":           "",
			}))
		})

		It("is idempotent: submitting the same work again returns the same Job", func() {
			w, first, job := submit(videogenv1alpha1.StageAnalyze)
			second, err := newBackend(k8sClient, "").Submit(ctx, w) // as after a restart
			Expect(err).NotTo(HaveOccurred())
			Expect(second).To(Equal(first))
			Expect(getJob(second).UID).To(Equal(job.UID))

			var jobs batchv1.JobList
			Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			Expect(jobs.Items).To(HaveLen(1))
		})

		It("refuses a capability without a pod template for good", func() {
			w := workFor(task, videogenv1alpha1.StageAnalyze)
			w.Capability = videogenv1alpha1.CapabilityPose
			_, err := backend.Submit(ctx, w)
			Expect(generation.IsPermanent(err)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring("no pod template for capability image.pose")))
		})

		It("labels instead of owning when Jobs run in a namespace of their own", func() {
			jobsNS := newNamespace()
			backend = newBackend(k8sClient, jobsNS)
			_, handle, job := submit(videogenv1alpha1.StageAnalyze)
			Expect(handle).To(HavePrefix(jobsNS + "/"))
			Expect(job.OwnerReferences).To(BeEmpty())
			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelTaskNamespace, ns))
			Expect(job.Labels).To(HaveKeyWithValue(jobbackend.LabelTaskUID, string(task.UID)))
		})
	})

	Describe("Observe", func() {
		It("reports Running with the pod's progress annotation", func() {
			w, handle, job := submit(videogenv1alpha1.StageAnalyze)
			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs).To(Equal(generation.Observation{State: generation.Running, Message: "waiting for a pod to start"}))

			pod := createJobPod(job, "a", podStatus{phase: corev1.PodRunning, progress: "40"})
			obs, err = backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Running))
			Expect(obs.Progress).To(BeEquivalentTo(40))
			Expect(obs.Message).To(Equal("running in pod " + pod.Name))
		})

		It("says when the pod waits for a node with a free GPU", func() {
			w, handle, job := submit(videogenv1alpha1.StageAnalyze)
			createJobPod(job, "a", podStatus{phase: corev1.PodPending, conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
			}}})
			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Running))
			Expect(obs.Message).To(Equal("waiting for a node: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))
		})

		It("hands an analyze stage's outputs from the termination message", func() {
			w, handle, job := submit(videogenv1alpha1.StageAnalyze)
			createJobPod(job, "a", podStatus{phase: corev1.PodFailed, exitCode: 1, message: "CUDA error"})
			createJobPod(job, "b", podStatus{phase: corev1.PodSucceeded, message: `{"outputs":{"faces":"1","box":[10,20,64,64]}}`})
			completeJob(job)

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Succeeded))
			Expect(obs.Progress).To(BeEquivalentTo(100))
			Expect(obs.Outputs).To(Equal(map[string]string{"faces": "1", "box": "[10,20,64,64]"}))
		})

		It("returns a render stage's result from the termination message", func() {
			w, handle, job := submit(videogenv1alpha1.StageRender)
			createJobPod(job, "a", podStatus{phase: corev1.PodSucceeded,
				message: `{"result":{"url":"https://cdn.example.com/out.mp4","media_type":"video/mp4","metadata":{"fps":"25"}}}`})
			completeJob(job)

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Succeeded))
			Expect(obs.Result).To(Equal(&videogenv1alpha1.TaskResult{
				URL: "https://cdn.example.com/out.mp4", MediaType: "video/mp4", Metadata: map[string]string{"fps": "25"}}))
		})

		It("fails the stage when the termination message is malformed", func() {
			w, handle, job := submit(videogenv1alpha1.StageRender)
			createJobPod(job, "a", podStatus{phase: corev1.PodSucceeded, message: "done!"})
			completeJob(job)

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Failed))
			Expect(obs.Message).To(ContainSubstring("completed but its result is unusable"))
			Expect(obs.Message).To(ContainSubstring("not the expected JSON"))
			Expect(obs.Message).To(ContainSubstring("done!"))
		})

		It("fails the stage with the Job's reason when its deadline passed", func() {
			w, handle, job := submit(videogenv1alpha1.StageRender)
			createJobPod(job, "a", podStatus{phase: corev1.PodFailed, exitCode: 137, message: "rendering frame 812/900"})
			failJob(job, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Failed))
			Expect(obs.Message).To(Equal("Job " + job.Name + " failed (DeadlineExceeded): Job was active longer than specified deadline; " +
				"container faceswap of pod " + job.Name + "-a exited with code 137: rendering frame 812/900"))
		})

		It("fails the stage with the Job's reason when its pods ran out of retries", func() {
			w, handle, job := submit(videogenv1alpha1.StageAnalyze)
			createJobPod(job, "a", podStatus{phase: corev1.PodFailed, exitCode: 1, message: "CUDA out of memory"})
			createJobPod(job, "b", podStatus{phase: corev1.PodFailed, exitCode: 1, message: "CUDA out of memory"})
			failJob(job, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Failed))
			Expect(obs.Message).To(HavePrefix("Job " + job.Name + " failed (BackoffLimitExceeded): Job has reached the specified backoff limit"))
			Expect(obs.Message).To(ContainSubstring("exited with code 1: CUDA out of memory"))
		})

		It("fails the stage for good when the Job was deleted", func() {
			w, handle, _ := submit(videogenv1alpha1.StageAnalyze)
			Expect(k8sClient.Delete(ctx, getJob(handle), client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())

			_, err := newBackend(k8sClient, "").Observe(ctx, w, handle)
			Expect(generation.IsPermanent(err)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring("no longer exists")))
			// Jobs outlive restarts: only a deletion removes one, and that stops it on purpose.
			Expect(generation.IsLost(err)).To(BeFalse(), "a deleted Job is not submitted again")
		})

		It("fails the stage for good when the unfinished Job is being deleted", func() {
			w, handle, _ := submit(videogenv1alpha1.StageAnalyze)
			// Orphan deletion waits for the garbage collector, which envtest does not run.
			Expect(k8sClient.Delete(ctx, getJob(handle), client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())

			_, err := backend.Observe(ctx, w, handle)
			Expect(generation.IsPermanent(err)).To(BeTrue())
			Expect(err).To(MatchError(ContainSubstring("is being deleted")))
		})

		It("still reads the result of a completed Job that its TTL is deleting", func() {
			w, handle, job := submit(videogenv1alpha1.StageAnalyze)
			createJobPod(job, "a", podStatus{phase: corev1.PodSucceeded, message: `{"outputs":{}}`})
			completeJob(job)
			Expect(k8sClient.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())

			obs, err := backend.Observe(ctx, w, handle)
			Expect(err).NotTo(HaveOccurred())
			Expect(obs.State).To(Equal(generation.Succeeded))
		})
	})

	Describe("Cancel", func() {
		It("deletes the Job, and cancelling again is fine", func() {
			w, handle, _ := submit(videogenv1alpha1.StageRender)
			Expect(backend.Cancel(ctx, w, handle)).To(Succeed())
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKeyFromObject(getJobKey(handle)), &batchv1.Job{})
			}).Should(Satisfy(apierrors.IsNotFound))
			Expect(backend.Cancel(ctx, w, handle)).To(Succeed())

			_, err := backend.Observe(ctx, w, handle)
			Expect(generation.IsPermanent(err)).To(BeTrue())
		})

		It("finds the Job from the work when no handle was recorded", func() {
			w, handle, _ := submit(videogenv1alpha1.StageAnalyze)
			Expect(backend.Cancel(ctx, w, "")).To(Succeed())
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKeyFromObject(getJobKey(handle)), &batchv1.Job{})
			}).Should(Satisfy(apierrors.IsNotFound))
		})
	})
})
