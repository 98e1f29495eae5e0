package main

import (
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A finished task shows the phase it ended in, as the PHASE column's comment says, not "-".
func TestAFinishedTaskShowsThePhaseItEndedIn(t *testing.T) {
	stages := func(analyze, render videogenv1alpha1.StageState) []videogenv1alpha1.StageStatus {
		return []videogenv1alpha1.StageStatus{{Name: videogenv1alpha1.StageAnalyze, State: analyze},
			{Name: videogenv1alpha1.StageRender, State: render}}
	}
	for _, c := range []struct {
		name   string
		phase  videogenv1alpha1.TaskPhase
		stages []videogenv1alpha1.StageStatus
		want   string
	}{
		{"running in analyze", videogenv1alpha1.TaskRunning, stages(videogenv1alpha1.StageRunning, videogenv1alpha1.StagePending), "analyze"},
		{"running between stages", videogenv1alpha1.TaskRunning, stages(videogenv1alpha1.StageSucceeded, videogenv1alpha1.StagePending), ""},
		{"succeeded", videogenv1alpha1.TaskSucceeded, stages(videogenv1alpha1.StageSucceeded, videogenv1alpha1.StageSucceeded), "render"},
		{"failed in analyze", videogenv1alpha1.TaskFailed, stages(videogenv1alpha1.StageFailed, videogenv1alpha1.StagePending), "analyze"},
		{"canceled in render", videogenv1alpha1.TaskFailed, stages(videogenv1alpha1.StageSucceeded, videogenv1alpha1.StageCanceled), "render"},
		{"ended before any stage", videogenv1alpha1.TaskFailed, nil, ""},
	} {
		task := &videogenv1alpha1.VideoTask{Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser},
			Status: videogenv1alpha1.VideoTaskStatus{Phase: c.phase, Stages: c.stages}}
		if got := rowOf(task).Phase; got != c.want {
			t.Errorf("%s: PHASE %q, want %q", c.name, got, c.want)
		}
	}
}
