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

// The backend is told when the template's media is an official Template's, the only template
// media it may fetch from the service's own network: a ShortTemplate's target_url is the
// account's, and so is a recorded URL an official template of that name never had.
func TestAStageIsToldWhetherTheTemplateMediaIsOfficial(t *testing.T) {
	r := &VideoTaskReconciler{}
	official := catalog.Template{ID: "beach", MediaURL: "http://media.svc/beach.mp4", Official: true}
	short := catalog.Template{ID: "ushort_a", MediaURL: "http://10.96.0.1/secret"}
	for _, c := range []struct {
		name     string
		recorded string
		official bool // as recorded at acceptance
		now      catalog.Template
		want     bool
	}{
		{"official, recorded so", official.MediaURL, true, official, true},
		{"official, its media moved since", "http://media.svc/old.mp4", true, official, true},
		{"accepted before it was recorded, official now", "", false, official, true},
		{"short template", short.MediaURL, false, short, false},
		{"short template then, an official one of its name now", short.MediaURL, false, official, false},
	} {
		task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: "vt", UID: "u"}}
		task.Status.TemplateMediaURL, task.Status.TemplateMediaOfficial = c.recorded, c.official
		for _, stage := range videogenv1alpha1.Stages {
			if got := r.work(task, c.now, stage).TemplateMediaOfficial; got != c.want {
				t.Errorf("%s, %s: TemplateMediaOfficial = %v, want %v", c.name, stage, got, c.want)
			}
		}
	}
}
