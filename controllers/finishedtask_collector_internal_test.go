package controllers

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// pagedList serves a VideoTask list a page at a time, as the kube-apiserver does with Limit
// and Continue (the fake client answers every item at once, in name order): the continue
// token is the last name served.
func pagedList(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	if err := cl.List(ctx, list, opts...); err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	tasks, ok := list.(*videogenv1alpha1.VideoTaskList)
	if !ok || lo.Limit <= 0 {
		return nil
	}
	// Resume after the last name served, as the kube-apiserver's key-ordered continue does: the
	// deletes of a page do not shift the next one.
	from := 0
	for from < len(tasks.Items) && lo.Continue != "" && tasks.Items[from].Name <= lo.Continue {
		from++
	}
	to := min(from+int(lo.Limit), len(tasks.Items))
	tasks.Continue = ""
	if to < len(tasks.Items) {
		tasks.Continue = tasks.Items[to-1].Name
	}
	tasks.Items = tasks.Items[from:to]
	return nil
}

// A finished task whose delete the cluster refuses for good (an
// admission policy of its own, say) must not keep the collector from every task listed after
// it. The sweep stopped at the first such error, at the same page each time: with pages of
// one, the task after the refused one was never deleted.
func TestACollectorSweepGoesOnPastATaskWhoseDeleteIsRefused(t *testing.T) {
	done := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	var objs []client.Object
	for _, name := range []string{"a-refused", "b-collectable", "c-collectable"} {
		objs = append(objs, &videogenv1alpha1.VideoTask{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)},
			Status:     videogenv1alpha1.VideoTaskStatus{Closed: true, CompletedAt: &done},
		})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs[0]).
		WithIndex(&videogenv1alpha1.VideoTask{}, videogenv1alpha1.FieldStatusClosed, func(o client.Object) []string {
			if o.(*videogenv1alpha1.VideoTask).Status.Closed {
				return []string{"true"}
			}
			return []string{"false"}
		}).
		WithInterceptorFuncs(interceptor.Funcs{List: pagedList, Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if obj.GetName() == "a-refused" {
				return apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "videotasks"}, obj.GetName(), nil)
			}
			return cl.Delete(ctx, obj, opts...)
		}}).Build()
	col := &finishedTaskCollector{client: c, reader: c, ttl: time.Hour, clock: clock.RealClock{}, page: 1}

	deleted, _, err := col.sweep(context.Background())
	if err == nil || !apierrors.IsForbidden(err) {
		t.Errorf("the sweep's error = %v, want the refused delete reported", err)
	}
	if deleted != 2 {
		t.Errorf("deleted %d tasks, want the 2 listed after the refused one", deleted)
	}
	var left videogenv1alpha1.VideoTaskList
	if err := c.List(context.Background(), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "a-refused" {
		t.Errorf("left %d tasks (%v), want only a-refused", len(left.Items), left.Items)
	}
}
