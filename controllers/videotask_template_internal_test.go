package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
)

func TestAStageRunsOnTheTemplateMediaRecordedAtAcceptance(t *testing.T) {
	now := catalog.Template{ID: "beach", MediaURL: "https://media.example/edited.mp4"}
	cases := []struct {
		name, recorded, want string
	}{
		{"recorded at acceptance", "https://media.example/accepted.mp4", "https://media.example/accepted.mp4"},
		// Accepted by a manager that did not record it: resolved as it was then.
		{"accepted before it was recorded", "", "https://media.example/edited.mp4"},
	}
	r := &VideoTaskReconciler{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt", UID: "u"}}
			task.Status.TemplateMediaURL = c.recorded
			for _, stage := range videogenv1alpha1.Stages {
				if got := r.work(task, now, stage).TemplateMediaURL; got != c.want {
					t.Errorf("%s stage runs on %q, want %q", stage, got, c.want)
				}
			}
		})
	}
}
