package controllers

import (
	"cmp"
	"context"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/catalog"
	"github.com/videogen-dev/videogen-operator/ledger"
	"github.com/videogen-dev/videogen-operator/pricing"
)

// indexAwaitingFreeze indexes the cached VideoTasks that the controller itself will freeze
// points for: new (Pending), not admitted under a REST apiserver reservation, not deleted, not
// cancelled.
const indexAwaitingFreeze = "videogen.dev/awaiting-freeze"

// freezeAheadMax is the most other new tasks one freeze takes along: one account write then
// carries up to 64 freezes.
const freezeAheadMax = 63

func awaitingFreeze(obj client.Object) []string {
	t, ok := obj.(*videogenv1alpha1.VideoTask)
	if !ok || !t.DeletionTimestamp.IsZero() || t.Labels[videogenv1alpha1.LabelReservation] != "" {
		return nil
	}
	if _, cancel := t.Annotations[videogenv1alpha1.AnnotationCancelRequested]; cancel {
		return nil
	}
	if p := t.Status.Phase; p != "" && p != videogenv1alpha1.TaskPending {
		return nil
	}
	return []string{"true"}
}

func indexTasksAwaitingFreeze(mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(context.Background(), &videogenv1alpha1.VideoTask{}, indexAwaitingFreeze, awaitingFreeze)
}

// freezesAhead returns the freeze of task together with those of the account's other new
// tasks that the cache shows waiting, oldest first (task keeps its own place, so a short
// balance goes to the older tasks, as if each had frozen in turn), and the index of task's own
// op. A backlog of new tasks (tasks applied with kubectl while no manager ran, or faster than
// it accepts them) then costs its account one write per batch instead of one per task: the
// other tasks' own reconciles find their holds made, a repeat that writes nothing. Tasks that
// do not price from the cache, or already hold points, are left to freeze on their own.
func (r *VideoTaskReconciler) freezesAhead(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) ([]ledger.Op, int) {
	own := []ledger.Op{ledger.Freeze(task.Name, price)}
	var waiting videogenv1alpha1.VideoTaskList
	if err := r.List(ctx, &waiting, client.InNamespace(task.Namespace), client.MatchingFields{indexAwaitingFreeze: "true"},
		client.UnsafeDisableDeepCopy); err != nil || len(waiting.Items) < 2 {
		return own, 0
	}
	acct := ledger.CachedAccount(ctx, r.Client, task.Namespace)
	if acct == nil {
		return own, 0
	}
	others := make([]*videogenv1alpha1.VideoTask, 0, len(waiting.Items))
	for i := range waiting.Items {
		t := &waiting.Items[i]
		if t.Name != task.Name && !acct.Status.HasHold(t.Name) {
			others = append(others, t)
		}
	}
	older := func(a, b *videogenv1alpha1.VideoTask) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	}
	slices.SortFunc(others, older)
	type entry struct {
		task *videogenv1alpha1.VideoTask
		op   ledger.Op
	}
	batch := []entry{{task, own[0]}}
	for _, t := range others {
		if len(batch) > freezeAheadMax {
			break
		}
		tmpl, err := catalog.Resolve(ctx, r.Client, t.Namespace, t.Spec.Capability, t.Spec.TemplateRef)
		if err != nil {
			continue
		}
		p, err := pricing.Quote(tmpl.Terms, t.Spec.Duration, r.Config.DefaultPrice)
		if err != nil {
			continue
		}
		batch = append(batch, entry{t, ledger.Freeze(t.Name, p)})
	}
	if len(batch) == 1 {
		return own, 0
	}
	slices.SortStableFunc(batch, func(a, b entry) int { return older(a.task, b.task) })
	ops := make([]ledger.Op, len(batch))
	self := 0
	for i, e := range batch {
		ops[i] = e.op
		if e.task == task {
			self = i
		}
	}
	return ops, self
}
