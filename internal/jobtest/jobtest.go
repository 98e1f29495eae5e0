// Package jobtest plays the Kubernetes Job controller for tests of the Job backend (envtest
// runs no controllers): it writes the Job statuses the kube-apiserver accepts. Tests only.
package jobtest

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Config is a Job backend config with one capability, video.short, on a GPU container.
const Config = `
ttlSecondsAfterFinished: 600
capabilities:
  video.short:
    template:
      spec:
        containers:
          - name: faceswap
            image: example.com/faceswap:1.0
            resources: {limits: {nvidia.com/gpu: 1}}
`

// Complete writes the status the Job controller writes when the Job's pod succeeded: the
// kube-apiserver requires startTime, completionTime and SuccessCriteriaMet before Complete.
func Complete(ctx context.Context, c client.Client, job *batchv1.Job) error {
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	end := metav1.NewTime(time.Now().Truncate(time.Second))
	job.Status.StartTime, job.Status.CompletionTime = &start, &end
	job.Status.Succeeded = 1
	const done = "Reached expected number of succeeded pods"
	job.Status.Conditions = []batchv1.JobCondition{
		condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, done),
		condition(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, done),
	}
	return c.Status().Update(ctx, job)
}

// Fail writes a Failed status with reason: the kube-apiserver requires FailureTarget first.
func Fail(ctx context.Context, c client.Client, job *batchv1.Job, reason, message string) error {
	start := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	job.Status.StartTime = &start
	job.Status.Failed = 1
	job.Status.Conditions = []batchv1.JobCondition{
		condition(batchv1.JobFailureTarget, reason, message),
		condition(batchv1.JobFailed, reason, message),
	}
	return c.Status().Update(ctx, job)
}

func condition(t batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	now := metav1.Now()
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: now, LastTransitionTime: now}
}
