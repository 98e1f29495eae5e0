package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A success waiting for its charge keeps its prepared status in ends until its terminal write;
// deleted meanwhile, it is never written, and the entry would stay for the manager's life.
func TestADeletedTaskWaitingForItsChargeIsForgotten(t *testing.T) {
	r := &VideoTaskReconciler{}
	now := metav1.Now()
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt", UID: "u", DeletionTimestamp: &now}}
	r.ends.Store(task.UID, &videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded})
	if _, err := r.finalize(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ends.Load(task.UID); ok {
		t.Fatal("the deleted task's prepared status is still kept")
	}
}
