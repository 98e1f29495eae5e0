package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func taskAt(rv string) *videogenv1alpha1.VideoTask {
	return &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", ResourceVersion: rv}}
}

func TestWrittenVersionsHoldBackOlderCopiesUntilTheCacheCatchesUp(t *testing.T) {
	var w writtenVersions
	if w.stale(taskAt("5")) {
		t.Fatal("a task never written is not stale")
	}
	w.wrote(taskAt("10"))
	if !w.stale(taskAt("9")) {
		t.Fatal("a copy older than our write is stale")
	}
	if w.stale(taskAt("11")) {
		t.Fatal("a copy newer than our write (someone else wrote) is not stale")
	}
	if w.stale(taskAt("9")) {
		t.Fatal("once the cache caught up the written version is forgotten")
	}
	w.wrote(taskAt("20"))
	w.forget(types.NamespacedName{Namespace: "ns", Name: "t"})
	if w.stale(taskAt("19")) {
		t.Fatal("a forgotten task is not held back")
	}
}

func TestSettlingTasksIsNilSafe(t *testing.T) {
	var s *settlingTasks
	s.begin(types.NamespacedName{Namespace: "ns", Name: "t"})
	if s.has("ns", "t") {
		t.Fatal("a nil set holds nothing")
	}
	s = newSettlingTasks()
	s.begin(types.NamespacedName{Namespace: "ns", Name: "t"})
	if !s.has("ns", "t") || s.has("ns", "u") {
		t.Fatal("has must report exactly the tasks begun")
	}
	s.end(types.NamespacedName{Namespace: "ns", Name: "t"})
	if s.has("ns", "t") {
		t.Fatal("an ended settle is no longer in flight")
	}
}
