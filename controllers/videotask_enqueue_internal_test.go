package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// countingQueue counts adds (the other methods are never called here).
type countingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	adds int
}

func (q *countingQueue) Add(reconcile.Request) { q.adds++ }

func TestClosedTasksAreNotEnqueued(t *testing.T) {
	r := &VideoTaskReconciler{}
	task := func(phase videogenv1alpha1.TaskPhase, charge videogenv1alpha1.ChargeState, closed bool) *videogenv1alpha1.VideoTask {
		t := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt"}}
		t.Status.Phase, t.Status.Charge, t.Status.Closed = phase, charge, closed
		return t
	}
	deleting := task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		task *videogenv1alpha1.VideoTask
		want int
	}{
		{"closed", task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, true), 0},
		{"terminal, still frozen", task(videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeFrozen, false), 1},
		{"settled by an older manager, not closed yet", task(videogenv1alpha1.TaskFailed, videogenv1alpha1.ChargeRefunded, false), 1},
		{"running", task(videogenv1alpha1.TaskRunning, videogenv1alpha1.ChargeFrozen, false), 1},
		{"new", task("", "", false), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &countingQueue{}
			r.enqueueTasks().Create(context.Background(), event.CreateEvent{Object: c.task, IsInInitialList: true}, q)
			if q.adds != c.want {
				t.Errorf("create: %d adds, want %d", q.adds, c.want)
			}
			q = &countingQueue{}
			r.enqueueTasks().Update(context.Background(), event.UpdateEvent{ObjectOld: c.task, ObjectNew: c.task}, q)
			if q.adds != c.want {
				t.Errorf("update: %d adds, want %d", q.adds, c.want)
			}
		})
	}
	q := &countingQueue{}
	r.enqueueTasks().Update(context.Background(), event.UpdateEvent{ObjectOld: deleting, ObjectNew: deleting}, q)
	if q.adds != 1 {
		t.Errorf("a closed task being deleted: %d adds, want 1", q.adds)
	}
}

func TestCollectEvery(t *testing.T) {
	for ttl, want := range map[string]string{"2s": "1s", "1m": "6s", "24h": "10m0s"} {
		d, _ := time.ParseDuration(ttl)
		if got := collectEvery(d).String(); got != want {
			t.Errorf("collectEvery(%s) = %s, want %s", ttl, got, want)
		}
	}
}
