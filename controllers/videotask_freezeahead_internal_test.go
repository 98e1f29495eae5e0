package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// backlogReconciler is a VideoTaskReconciler over a fake client holding an account with
// `held` holds and `waiting` new tasks (the first `held` of them frozen ahead already), one
// second apart.
func backlogReconciler(t testing.TB, waiting, held int) (*VideoTaskReconciler, []*videogenv1alpha1.VideoTask) {
	t.Helper()
	const ns = "acct"
	tmpl := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "short"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, Price: ptr.To[int64](10)}}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
	objs := []client.Object{tmpl, acct}
	var tasks []*videogenv1alpha1.VideoTask
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var names []string
	for i := range waiting {
		task := &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("task-%05d", i),
				CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i) * time.Second))},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: "short"},
		}
		if i < held {
			names = append(names, task.Name)
		}
		tasks = append(tasks, task)
		objs = append(objs, task)
	}
	if held > 0 {
		acct.Status.Holds = []videogenv1alpha1.HoldGroup{{Amount: 10, Tasks: names}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithIndex(&videogenv1alpha1.VideoTask{}, indexAwaitingFreeze, awaitingFreeze).
		WithObjects(objs...).WithStatusSubresource(acct).Build()
	return &VideoTaskReconciler{Client: c, Config: TaskConfig{DefaultPrice: 10}}, tasks
}

func TestFreezesAheadTakesTheOldestUnheldTasksAndKeepsTheTasksPlace(t *testing.T) {
	r, tasks := backlogReconciler(t, 100, 10)
	// The 50th task's reconcile: tasks 0-9 hold points already; 10-72 (63 of them) come
	// along, oldest first, with task 50 in its own place.
	ops, self := r.freezesAhead(context.Background(), tasks[50], 10)
	if len(ops) != freezeAheadMax+1 {
		t.Fatalf("%d ops, want %d", len(ops), freezeAheadMax+1)
	}
	for i, op := range ops {
		if want := tasks[10+i].Name; op.Task() != want {
			t.Fatalf("op %d freezes %s, want %s", i, op.Task(), want)
		}
	}
	if ops[self].Task() != tasks[50].Name {
		t.Fatalf("self %d is %s, want %s", self, ops[self].Task(), tasks[50].Name)
	}
	// The youngest task's reconcile: it keeps its place at the end, after the 63 oldest.
	ops, self = r.freezesAhead(context.Background(), tasks[99], 10)
	if self != len(ops)-1 || ops[self].Task() != tasks[99].Name || ops[0].Task() != tasks[10].Name {
		t.Fatalf("youngest: self %d of %d ops, first %s", self, len(ops), ops[0].Task())
	}
}

// BenchmarkFreezesAhead is one accept's look at a backlog of new tasks of which half are
// frozen ahead already: the lookup every reconcile of such a backlog makes. The fake client's
// List (a deep copy of every task) is part of it; the informer's is not.
func BenchmarkFreezesAhead(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			r, tasks := backlogReconciler(b, n, n/2)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if ops, _ := r.freezesAhead(ctx, tasks[n*7/10], 10); len(ops) != freezeAheadMax+1 {
					b.Fatalf("%d ops", len(ops))
				}
			}
		})
	}
}
