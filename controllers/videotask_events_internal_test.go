package controllers

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// runningStatus is the status of a task in its render stage, as a reconcile meets it.
func runningStatus() *videogenv1alpha1.VideoTaskStatus {
	cost := int64(30)
	return &videogenv1alpha1.VideoTaskStatus{
		Phase: videogenv1alpha1.TaskRunning, Cost: &cost, Charge: videogenv1alpha1.ChargeFrozen, Progress: 60,
		Stages: []videogenv1alpha1.StageStatus{
			{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Handle: "stg_a", Backend: "worker",
				Outputs: map[string]string{"face_box": "[1,2,3,4]", "face_track": `{"frames":45,"samples":[]}`}},
			{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageRunning, Handle: "stg_r", Backend: "worker", Progress: 20},
		},
		Conditions: []metav1.Condition{
			{Type: videogenv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonFrozen, Message: "Froze 30 points"},
			{Type: videogenv1alpha1.ConditionDispatched, Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonBackendAccepted, Message: "worker accepted the render stage"},
		},
	}
}

func TestMarkProgress(t *testing.T) {
	st := runningStatus()
	if m := markProgress(st); !m.accepted || m.started != 0b11 {
		t.Errorf("running task: %+v, want accepted and both stages started", m)
	}
	st.Stages[1].Handle = ""
	st.Conditions = st.Conditions[1:]
	if m := markProgress(st); m.accepted || m.started != 0b01 {
		t.Errorf("render not submitted, not accepted: %+v", m)
	}
	if m := markProgress(&videogenv1alpha1.VideoTaskStatus{}); m != (progressMark{}) {
		t.Errorf("new task: %+v", m)
	}
}

// A stage submitted again is told by a Warning for each resubmission the reconcile wrote (one
// reconcile may write two), even with --task-events=false, and never again for the same ones.
func TestRecordProgressTellsEachResubmissionOfALostStage(t *testing.T) {
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"}, Status: *runningStatus()}
	recorder := events.NewFakeRecorder(10)
	r := &VideoTaskReconciler{Recorder: recorder} // Config.TransitionEvents is false
	drain := func() []string {
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		return got
	}

	before := markProgress(&task.Status)
	task.Status.Stages[1].Resubmissions = 2
	r.recordProgress(before, task)
	want := []string{
		"Warning StageLost the backend lost the render stage (it may have restarted); submitted it again, 1 of 2",
		"Warning StageLost the backend lost the render stage (it may have restarted); submitted it again, 2 of 2",
	}
	if got := drain(); !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	r.recordProgress(markProgress(&task.Status), task)
	if got := drain(); len(got) != 0 {
		t.Errorf("a reconcile that wrote no resubmission told of one: %q", got)
	}
}

// What each VideoTask reconcile spends to remember where the task was, for its events: a mark
// of a few bits, against the copy of the whole status it replaced.
func BenchmarkReconcileProgressSnapshot(b *testing.B) {
	st := runningStatus()
	b.Run("mark", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = markProgress(st)
		}
	})
	b.Run("deepcopy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = st.DeepCopy()
		}
	})
}

// actionRecorder records each event's type, reason and action: what client-go's events
// broadcaster folds events by (with the regarding and related objects and the reporter), not
// the note.
type actionRecorder struct{ keys, notes []string }

func (a *actionRecorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	a.keys = append(a.keys, eventtype+"/"+reason+"/"+action)
	a.notes = append(a.notes, fmt.Sprintf(note, args...))
}

// The backend tour's worker that lost a stage twice: kubectl showed one StageLost, "1 of 2",
// with series.count 2. The two Warnings had the same type, reason and action, so the events
// broadcaster folded the second ("2 of 2") into the first's series, its note lost. Each
// resubmission's event must have a key of its own.
func TestEachResubmissionsEventIsKeptApart(t *testing.T) {
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1"}, Status: *runningStatus()}
	recorder := &actionRecorder{}
	r := &VideoTaskReconciler{Recorder: recorder}
	before := markProgress(&task.Status)
	task.Status.Stages[1].Resubmissions = 2
	r.recordProgress(before, task)
	if len(recorder.keys) != 2 {
		t.Fatalf("events %q, want the two resubmissions'", recorder.notes)
	}
	if recorder.keys[0] == recorder.keys[1] {
		t.Errorf("both resubmissions' events are %s: the broadcaster folds %q into the series of %q", recorder.keys[0], recorder.notes[1], recorder.notes[0])
	}
}
