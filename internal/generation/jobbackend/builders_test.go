package jobbackend_test

import (
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/jobtest"
)

var namespaces atomic.Int32

// newNamespace creates a namespace of its own for one spec.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("jobs-%d", namespaces.Add(1))}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// newTask creates a real video.short VideoTask for the Jobs to belong to.
func newTask(ns, name string) *videogenv1alpha1.VideoTask {
	task := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: videogenv1alpha1.VideoTaskSpec{
			Capability:  videogenv1alpha1.CapabilityShort,
			TemplateRef: "beach-dance",
			Inputs:      videogenv1alpha1.TaskInputs{FaceImageURL: "https://media.example.com/face.jpg"},
		},
	}
	Expect(k8sClient.Create(ctx, task)).To(Succeed())
	return task
}

// workFor is the Work the VideoTask controller would hand the backend.
func workFor(task *videogenv1alpha1.VideoTask, stage videogenv1alpha1.StageName) generation.Work {
	w := generation.Work{
		Key:              generation.WorkKey(task.Namespace, task.Name, string(task.UID), stage),
		Namespace:        task.Namespace,
		Task:             task.Name,
		TaskUID:          string(task.UID),
		Capability:       task.Spec.Capability,
		Stage:            stage,
		TemplateID:       task.Spec.TemplateRef,
		TemplateMediaURL: "https://media.example.com/templates/beach-dance.mp4",
		// An official template's.
		TemplateMediaOfficial: true,
		Inputs:                task.Spec.Inputs,
	}
	if stage == videogenv1alpha1.StageRender {
		w.Previous = map[string]string{"faces": "1"}
	}
	return w
}

func newBackend(c client.Client, namespace string) *jobbackend.Backend {
	config, err := jobbackend.ParseConfig([]byte(jobtest.Config))
	Expect(err).NotTo(HaveOccurred())
	config.Namespace = namespace
	b, err := jobbackend.New(c, config)
	Expect(err).NotTo(HaveOccurred())
	return b
}

func getJob(handle string) *batchv1.Job {
	job := getJobKey(handle)
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
	return job
}

// getJobKey is an empty Job carrying only the namespace and name in handle.
func getJobKey(handle string) *batchv1.Job {
	ns, name, _ := strings.Cut(handle, "/")
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// completeJob and failJob play the Job controller.
func completeJob(job *batchv1.Job) { Expect(jobtest.Complete(ctx, k8sClient, job)).To(Succeed()) }

func failJob(job *batchv1.Job, reason, message string) {
	Expect(jobtest.Fail(ctx, k8sClient, job, reason, message)).To(Succeed())
}

// podStatus is what the kubelet would report for the Job's pod.
type podStatus struct {
	phase      corev1.PodPhase
	exitCode   int32
	message    string // termination message; terminated only when phase is Succeeded or Failed
	progress   string // the videogen.dev/progress annotation, if any
	conditions []corev1.PodCondition
}

// createJobPod creates a pod as the Job controller would (same labels) and sets its status.
func createJobPod(job *batchv1.Job, suffix string, st podStatus) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace,
			Name:      job.Name + "-" + suffix,
			Labels:    job.Spec.Template.Labels,
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if st.progress != "" {
		pod.Annotations = map[string]string{jobbackend.AnnotationProgress: st.progress}
	}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())

	pod.Status.Phase = st.phase
	pod.Status.Conditions = st.conditions
	for _, ctr := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ImageID: "sha256:0"}
		switch st.phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: st.exitCode, Message: st.message,
				Reason: "Completed", ContainerID: "containerd://" + pod.Name}
		case corev1.PodRunning:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
			cs.Ready, cs.Started = true, ptr.To(true)
		default:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}
