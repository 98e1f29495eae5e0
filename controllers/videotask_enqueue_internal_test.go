package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// recordingQueue records how items are added (the other methods are never called here).
type recordingQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	adds []priorityqueue.AddOpts
}

func (q *recordingQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for range items {
		q.adds = append(q.adds, o)
	}
}

func (q *recordingQueue) Add(reconcile.Request) { q.adds = append(q.adds, priorityqueue.AddOpts{}) }

func TestStartupSchedulesFinishedTasksForTheirTTL(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	r := &VideoTaskReconciler{Clock: clocktesting.NewFakePassiveClock(now), Config: TaskConfig{FinishedTTL: time.Hour}}
	task := func(phase videogenv1alpha1.TaskPhase, charge videogenv1alpha1.ChargeState, completedAgo time.Duration) *videogenv1alpha1.VideoTask {
		t := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt"}}
		t.Status.Phase, t.Status.Charge = phase, charge
		if completedAgo > 0 {
			at := metav1.NewTime(now.Add(-completedAgo))
			t.Status.CompletedAt = &at
		}
		return t
	}
	low := handler.LowPriority
	cases := []struct {
		name        string
		task        *videogenv1alpha1.VideoTask
		initialList bool
		wantAfter   time.Duration
		wantLow     bool
	}{
		{"finished and settled: at its TTL", task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, 20*time.Minute), true, 40 * time.Minute, true},
		{"TTL already over: now", task(videogenv1alpha1.TaskFailed, videogenv1alpha1.ChargeRefunded, 2*time.Hour), true, 0, true},
		{"finished but still frozen: now", task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeFrozen, time.Minute), true, 0, true},
		{"running: now", task(videogenv1alpha1.TaskRunning, videogenv1alpha1.ChargeFrozen, 0), true, 0, true},
		{"created while running: now, normal priority", task("", "", 0), false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &recordingQueue{}
			r.enqueueTasks().Create(context.Background(), event.CreateEvent{Object: c.task, IsInInitialList: c.initialList}, q)
			if len(q.adds) != 1 {
				t.Fatalf("%d adds, want 1", len(q.adds))
			}
			got := q.adds[0]
			if got.After != c.wantAfter {
				t.Errorf("after %s, want %s", got.After, c.wantAfter)
			}
			if isLow := got.Priority != nil && *got.Priority == low; isLow != c.wantLow {
				t.Errorf("low priority %v, want %v", isLow, c.wantLow)
			}
		})
	}

	r.Config.FinishedTTL = 0 // no TTL: a settled task has nothing to do ever
	q := &recordingQueue{}
	r.enqueueTasks().Create(context.Background(), event.CreateEvent{Object: task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, time.Minute), IsInInitialList: true}, q)
	if len(q.adds) != 0 {
		t.Errorf("a settled task without TTL was enqueued: %+v", q.adds)
	}
}
