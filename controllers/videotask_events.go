package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// Event reasons of the steps a task takes on its way; how it ends is told by recordOutcome.
const (
	EventStageStarted = "StageStarted"
	EventSucceeded    = "Succeeded"
)

// recordProgress emits a Normal event for each step the reconcile just wrote: the points frozen
// and each stage a backend accepted, so `kubectl describe videotask` tells the task's story.
// before is the status the reconcile started from. Events are sent asynchronously and dropped
// rather than queued without bound when the kube-apiserver is slow; --task-events=false turns
// these off on clusters that run tasks by the hundred per second (failures are still told).
func (r *VideoTaskReconciler) recordProgress(before *videogenv1alpha1.VideoTaskStatus, task *videogenv1alpha1.VideoTask) {
	if !r.Config.TransitionEvents {
		return
	}
	if c := meta.FindStatusCondition(task.Status.Conditions, videogenv1alpha1.ConditionAccepted); c != nil &&
		c.Status == "True" && !meta.IsStatusConditionTrue(before.Conditions, videogenv1alpha1.ConditionAccepted) {
		r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, c.Reason, "Freeze", "%s", c.Message)
	}
	for _, st := range task.Status.Stages {
		if st.Handle == "" || stageHandle(before, st.Name) != "" {
			continue
		}
		// The action names the stage: the recorder folds events that differ only in their note
		// into one series.
		action := "Start" + strings.ToUpper(string(st.Name[:1])) + string(st.Name[1:])
		r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, EventStageStarted, action, "%s started the %s stage", st.Backend, st.Name)
	}
}

// recordSuccess is the closing event of a task that succeeded and was charged.
func (r *VideoTaskReconciler) recordSuccess(task *videogenv1alpha1.VideoTask, res ledger.Result) {
	if !r.Config.TransitionEvents {
		return
	}
	msg := "Generation finished"
	if task.Status.Result != nil && task.Status.Result.URL != "" {
		msg = fmt.Sprintf("Generation finished: %s", task.Status.Result.URL)
	}
	r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, EventSucceeded, "Settle", "%s; deducted %d points", msg, res.Amount)
}

func stageHandle(status *videogenv1alpha1.VideoTaskStatus, name videogenv1alpha1.StageName) string {
	for _, st := range status.Stages {
		if st.Name == name {
			return st.Handle
		}
	}
	return ""
}
