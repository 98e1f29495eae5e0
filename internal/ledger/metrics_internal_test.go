package ledger

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// moved is videogen_points_moved_total of the harness's account, by operation.
type moved struct{ freeze, deduct, refund int64 }

func (h *harness) moved() moved {
	h.t.Helper()
	get := func(op string) int64 {
		m := &dto.Metric{}
		must(h.t, pointsMoved.WithLabelValues(h.ns, op).Write(m))
		return int64(m.GetCounter().GetValue())
	}
	return moved{freeze: get("freeze"), deduct: get("deduct"), refund: get("refund")}
}

// expectMoved checks the counter against want, and that every point it says was frozen was
// deducted, refunded, or is frozen now.
func (h *harness) expectMoved(l *Ledger, want moved) {
	h.t.Helper()
	got, frozen := h.moved(), h.figures(l).Frozen
	if got != want {
		h.t.Errorf("points moved %+v, want %+v", got, want)
	}
	if got.freeze != got.deduct+got.refund+frozen {
		h.t.Errorf("points moved %+v with %d frozen: freeze != deduct + refund + frozen", got, frozen)
	}
}

// Each way a task's points move is counted once: the freeze when its hold is decided, then a
// deduction or a refund, however the hold ends.
func TestPointsMovedCountsEachHoldOnce(t *testing.T) {
	refunded := ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, false)
	closedRefunded := ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, true)

	t.Run("canceled: its status says Refunded", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.create(h.l, "t", 25)
		h.expectMoved(h.l, moved{freeze: 25})
		h.writeStatus(h.l, task, refunded)
		h.expectMoved(h.l, moved{freeze: 25, refund: 25})
	})

	t.Run("failed: it leaves the open tasks' cache before its final status is seen", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.create(h.l, "t", 25)
		closed := task.DeepCopy()
		closedRefunded(&closed.Status)
		must(t, k8s.Status().Update(h.ctx, closed))
		h.feedDelete(h.l, closed) // the closed task leaves the cache's selection
		h.l.Observe(closed)       // the controller's copy comes after
		h.books(h.settle(h.l), 100, 0, 0)
		h.expectMoved(h.l, moved{freeze: 25, refund: 25})
	})

	t.Run("deleted while it runs", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.create(h.l, "t", 25)
		must(t, k8s.Delete(h.ctx, task))
		h.feedDelete(h.l, task)
		h.books(h.settle(h.l), 100, 0, 0)
		h.expectMoved(h.l, moved{freeze: 25, refund: 25})
	})

	t.Run("timed out before it ran: one status write records its hold and its refund", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.task("k")
		must(t, k8s.Create(h.ctx, task))
		h.feed(h.l, task)
		must(t, admit(h.l, task, 5))
		h.writeStatus(h.l, task, closedRefunded)
		h.feedDelete(h.l, task)
		h.books(h.settle(h.l), 100, 0, 0)
		h.expectMoved(h.l, moved{freeze: 5, refund: 5})
	})

	t.Run("succeeded: charged once, nothing refunded when it closes", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.create(h.l, "t", 25)
		h.charge(h.l, task)
		h.settle(h.l)
		h.expectMoved(h.l, moved{freeze: 25, deduct: 25})
		done := h.writeStatus(h.l, task, ended(videogenv1alpha1.ChargeDeducted, videogenv1alpha1.TaskSucceeded, true))
		h.feedDelete(h.l, done)
		h.books(h.settle(h.l), 100, 25, 0)
		h.expectMoved(h.l, moved{freeze: 25, deduct: 25})
	})

	t.Run("deleted while its charge waits: the charge is still made, nothing refunded", func(t *testing.T) {
		h := newHarness(t, 100)
		task := h.create(h.l, "t", 25)
		if _, err := h.l.Charge(task, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/t.mp4"}); err != nil {
			t.Fatal(err)
		}
		must(t, k8s.Delete(h.ctx, task))
		h.feedDelete(h.l, task)
		h.books(h.settle(h.l), 100, 25, 0)
		h.expectMoved(h.l, moved{freeze: 25, deduct: 25})
	})

	t.Run("never held points: rejected, or its admission taken back", func(t *testing.T) {
		h := newHarness(t, 100)
		rejected := h.task("rejected")
		must(t, k8s.Create(h.ctx, rejected))
		h.feed(h.l, rejected)
		h.writeStatus(h.l, rejected, ended("", videogenv1alpha1.TaskFailed, true))
		unadmitted := h.task("unadmitted")
		must(t, k8s.Create(h.ctx, unadmitted))
		h.feed(h.l, unadmitted)
		must(t, admit(h.l, unadmitted, 5))
		h.l.Unadmit(unadmitted)
		must(t, k8s.Delete(h.ctx, unadmitted))
		h.feedDelete(h.l, unadmitted)
		h.books(h.settle(h.l), 100, 0, 0)
		h.expectMoved(h.l, moved{})
	})

	t.Run("the QA run: canceled, failed, deleted, timed out", func(t *testing.T) {
		h := newHarness(t, 100)
		canceled := h.create(h.l, "canceled", 25)
		failed := h.create(h.l, "failed", 25)
		deleted := h.create(h.l, "deleted", 25)
		h.writeStatus(h.l, canceled, refunded)
		closed := failed.DeepCopy()
		closedRefunded(&closed.Status)
		must(t, k8s.Status().Update(h.ctx, closed))
		h.feedDelete(h.l, closed)
		must(t, k8s.Delete(h.ctx, deleted))
		h.feedDelete(h.l, deleted)
		late := h.task("late")
		must(t, k8s.Create(h.ctx, late))
		h.feed(h.l, late)
		must(t, admit(h.l, late, 5))
		h.writeStatus(h.l, late, closedRefunded)
		h.books(h.settle(h.l), 100, 0, 0)
		h.expectMoved(h.l, moved{freeze: 80, refund: 80})
	})
}
