package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Event reasons of the steps a task takes on its way; how it ends is told by recordOutcome.
const (
	EventStageStarted = "StageStarted"
	EventSucceeded    = "Succeeded"
	// EventStageLost is the Warning of a stage its backend lost and that was submitted again.
	EventStageLost = "StageLost"
	// EventHoldReleased, on the PointAccount, names a task deleted before it ended, whose hold
	// ended with it, nothing charged.
	EventHoldReleased = "HoldReleased"
)

// progressMark is what recordProgress compares the written status with: whether the task's
// points were frozen and which stages a backend had accepted when the reconcile began. A few
// bits taken on every reconcile, rather than a copy of the status.
type progressMark struct {
	accepted bool
	started  uint8 // bit i: videogenv1alpha1.Stages[i] has a handle
	// resubmitted[i]: how often videogenv1alpha1.Stages[i] was submitted again (at most
	// maxResubmissions, so a byte).
	resubmitted [2]uint8
}

func markProgress(st *videogenv1alpha1.VideoTaskStatus) progressMark {
	m := progressMark{accepted: meta.IsStatusConditionTrue(st.Conditions, videogenv1alpha1.ConditionAccepted)}
	for _, s := range st.Stages {
		i := slices.Index(videogenv1alpha1.Stages, s.Name)
		if i >= 0 && s.Handle != "" {
			m.started |= 1 << i
		}
		if i >= 0 && i < len(m.resubmitted) {
			m.resubmitted[i] = uint8(min(max(s.Resubmissions, 0), 255))
		}
	}
	return m
}

// recordProgress emits a Normal event for each step the reconcile just wrote: the points frozen
// and each stage a backend accepted, so `kubectl describe videotask` tells the task's story.
// before marks the status the reconcile started from. Events are sent asynchronously and
// dropped rather than queued without bound when the kube-apiserver is slow;
// --task-events=false turns these off on clusters that run tasks by the hundred per second
// (failures are still told).
func (r *VideoTaskReconciler) recordProgress(before progressMark, task *videogenv1alpha1.VideoTask) {
	now := markProgress(&task.Status)
	r.recordResubmissions(before, now, task)
	if !r.Config.TransitionEvents {
		return
	}
	if now.accepted && !before.accepted {
		c := meta.FindStatusCondition(task.Status.Conditions, videogenv1alpha1.ConditionAccepted)
		r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, c.Reason, "Freeze", "%s", c.Message)
	}
	for _, st := range task.Status.Stages {
		i := slices.Index(videogenv1alpha1.Stages, st.Name)
		if i < 0 || now.started&^before.started&(1<<i) == 0 {
			continue
		}
		// The action names the stage: the recorder folds events that differ only in their note
		// into one series.
		action := "Start" + strings.ToUpper(string(st.Name[:1])) + string(st.Name[1:])
		r.Recorder.Eventf(task, nil, corev1.EventTypeNormal, EventStageStarted, action, "%s started the %s stage", st.Backend, st.Name)
	}
}

// recordResubmissions emits a Warning for each stage the reconcile just wrote as submitted again
// because its backend lost it, whatever --task-events says: on-call wants to know of a backend
// that loses work, and the task's caller sees why it takes longer.
func (r *VideoTaskReconciler) recordResubmissions(before, now progressMark, task *videogenv1alpha1.VideoTask) {
	if now.resubmitted == before.resubmitted {
		return
	}
	for _, st := range task.Status.Stages {
		i := slices.Index(videogenv1alpha1.Stages, st.Name)
		if i < 0 || i >= len(now.resubmitted) || now.resubmitted[i] <= before.resubmitted[i] {
			continue
		}
		for n := before.resubmitted[i] + 1; n <= now.resubmitted[i]; n++ { // one reconcile may submit it again twice
			// The action names the stage and the resubmission (ResubmitRender2): the recorder
			// folds events that differ only in their note into one series, and "2 of 2" would
			// show as a second count of "1 of 2".
			action := fmt.Sprintf("Resubmit%s%s%d", strings.ToUpper(string(st.Name[:1])), st.Name[1:], n)
			r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, EventStageLost, action, "%s; submitted it again, %d of %d",
				lostStage(st.Name), n, maxResubmissions)
		}
	}
}
