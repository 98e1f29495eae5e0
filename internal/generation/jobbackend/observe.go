package jobbackend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// jobPods lists the Job's pods, newest first. The controller-uid label keeps out pods of an
// earlier Job that had the same name.
func (b *Backend) jobPods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := b.client.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{
		batchv1.JobNameLabel:       job.Name,
		batchv1.ControllerUidLabel: string(job.UID),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return pods, nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return findJobCondition(job, t) != nil
}

func findJobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// completed reads the result from the termination message of the Job's succeeded pod.
func (b *Backend) completed(w generation.Work, job *batchv1.Job, pods []corev1.Pod) generation.Observation {
	fail := func(format string, args ...any) generation.Observation {
		return generation.Observation{State: generation.Failed,
			Message: fmt.Sprintf("Job %s completed but its result is unusable: %s", job.Name, fmt.Sprintf(format, args...))}
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if i < 0 {
		if done := job.Status.CompletionTime; done == nil || b.cfg.Clock.Now().Sub(done.Time) <= cacheGrace {
			return generation.Observation{State: generation.Running, Progress: 100, Message: "Job completed, waiting to read the result from its pod"}
		}
		return fail("none of its pods is left to read the termination message from")
	}
	pod := &pods[i]
	name := resultContainerOf(job)
	st := containerStatus(pod, name)
	if st == nil || st.State.Terminated == nil {
		return fail("container %s of pod %s has no terminated state", name, pod.Name)
	}
	msg := st.State.Terminated.Message
	switch w.Stage {
	case videogenv1alpha1.StageAnalyze:
		outputs, err := parseAnalyzeMessage(msg)
		if err != nil {
			return fail("container %s of pod %s: %v", name, pod.Name, err)
		}
		return generation.Observation{State: generation.Succeeded, Progress: 100, Outputs: outputs}
	default:
		result, err := parseRenderMessage(msg)
		if err != nil {
			return fail("container %s of pod %s: %v", name, pod.Name, err)
		}
		return generation.Observation{State: generation.Succeeded, Progress: 100, Result: result}
	}
}

// failed explains a failed Job with its condition and, when there is one, the newest failed
// container's exit code and termination message (its last log lines if it wrote none).
func failed(job *batchv1.Job, pods []corev1.Pod) generation.Observation {
	cond := findJobCondition(job, batchv1.JobFailed)
	msg := fmt.Sprintf("Job %s failed (%s): %s", job.Name, cond.Reason, cond.Message)
	if detail := lastContainerFailure(pods, resultContainerOf(job)); detail != "" {
		msg += "; " + detail
	}
	return generation.Observation{State: generation.Failed, Message: msg}
}

func lastContainerFailure(pods []corev1.Pod, preferred string) string {
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodFailed {
			continue
		}
		detail := ""
		for _, st := range pod.Status.ContainerStatuses {
			t := st.State.Terminated
			if t == nil || t.ExitCode == 0 {
				continue
			}
			detail = fmt.Sprintf("container %s of pod %s exited with code %d", st.Name, pod.Name, t.ExitCode)
			if m := excerpt(t.Message); m != "" {
				detail += ": " + m
			}
			if st.Name == preferred {
				break // the result container's failure says most
			}
		}
		if detail != "" {
			return detail
		}
	}
	return ""
}

// running reports the highest progress any live pod annotated, and what the Job waits for.
func running(pods []corev1.Pod) generation.Observation {
	obs := generation.Observation{State: generation.Running, Message: "waiting for a pod to start"}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if p, ok := parseProgress(pod.Annotations[AnnotationProgress]); ok && p > obs.Progress {
			obs.Progress = p
		}
	}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning {
			obs.Message = "running in pod " + pod.Name
			return obs
		}
		if why := unschedulable(&pod); why != "" {
			obs.Message = "waiting for a node: " + why
		}
	}
	return obs
}

// unschedulable is the scheduler's message for a pod no node can take yet (e.g. no free GPU).
func unschedulable(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message
		}
	}
	return ""
}

func resultContainerOf(job *batchv1.Job) string {
	if name := job.Annotations[AnnotationResultContainer]; name != "" {
		return name
	}
	if cs := job.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Name
	}
	return ""
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i, st := range pod.Status.ContainerStatuses {
		if st.Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
