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
	own := ledger.Freeze(task.Name, price)
	var waiting videogenv1alpha1.VideoTaskList
	if err := r.List(ctx, &waiting, client.InNamespace(task.Namespace), client.MatchingFields{indexAwaitingFreeze: "true"},
		client.UnsafeDisableDeepCopy); err != nil || len(waiting.Items) < 2 {
		return []ledger.Op{own}, 0
	}
	acct := ledger.CachedAccount(ctx, r.Client, task.Namespace)
	if acct == nil {
		return []ledger.Op{own}, 0
	}
	held := acct.Status.HoldsByTask() // one pass over the holds, not one per waiting task
	others := make([]*videogenv1alpha1.VideoTask, 0, len(waiting.Items))
	for i := range waiting.Items {
		t := &waiting.Items[i]
		if _, ok := held[t.Name]; !ok && t.Name != task.Name {
			others = append(others, t)
		}
	}
	slices.SortFunc(others, olderFirst)
	// The oldest others that price from the cache, with task's own op in its place.
	ops, self, taken := make([]ledger.Op, 0, min(len(others), freezeAheadMax)+1), -1, 0
	for _, t := range others {
		if taken == freezeAheadMax {
			break
		}
		if self < 0 && olderFirst(task, t) < 0 {
			self, ops = len(ops), append(ops, own)
		}
		tmpl, err := catalog.Resolve(ctx, r.Client, t.Namespace, t.Spec.Capability, t.Spec.TemplateRef)
		if err != nil {
			continue
		}
		if p, err := pricing.Quote(tmpl.Terms, t.Spec.Duration, r.Config.DefaultPrice); err == nil {
			ops, taken = append(ops, ledger.Freeze(t.Name, p)), taken+1
		}
	}
	if self < 0 {
		self, ops = len(ops), append(ops, own)
	}
	return ops, self
}

// olderFirst orders tasks by creation, then name (creationTimestamp has one-second resolution).
func olderFirst(a, b *videogenv1alpha1.VideoTask) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
