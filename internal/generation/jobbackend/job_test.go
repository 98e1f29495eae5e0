package jobbackend

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

func testWork(stage videogenv1alpha1.StageName) generation.Work {
	return generation.Work{
		Key:        generation.WorkKey("acme", "first-short", "0b5c-uid", stage),
		Namespace:  "acme",
		Task:       "first-short",
		TaskUID:    "0b5c-uid",
		Capability: videogenv1alpha1.CapabilityEraser,
		Stage:      stage,
		TemplateID: "beach-dance",
		Inputs:     videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example.com/in.mp4?sig=a$b"},
		Duration:   ptr.To[int32](15),
		Previous:   map[string]string{"boxes": "[1,2]"},
	}
}

func TestJobNameIsStableShortAndValid(t *testing.T) {
	w := testWork(videogenv1alpha1.StageRender)
	name := JobName(w.Key, w.Stage)
	if name != JobName(w.Key, w.Stage) {
		t.Fatal("JobName is not deterministic")
	}
	if !strings.HasPrefix(name, "vt-") || !strings.HasSuffix(name, "-render") || len(name) > 63 {
		t.Fatalf("JobName = %q", name)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Fatalf("JobName %q is not a DNS-1123 label: %v", name, errs)
	}
	other := generation.WorkKey("acme", "first-short", "another-uid", w.Stage)
	if JobName(other, w.Stage) == name {
		t.Fatal("two tasks share a Job name")
	}
}

// Whether the face was sent inline goes to the containers as an env var only: a container that
// takes the inputs as flags may refuse one it does not know.
func TestBuildJobSaysWhetherTheFaceWasUploaded(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, uploaded := range []bool{true, false} {
		w := testWork(videogenv1alpha1.StageAnalyze)
		w.FaceImageUploaded = uploaded
		pod := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w)).Spec.Template.Spec
		for _, ctr := range pod.Containers {
			want := map[bool]string{true: "true", false: ""}[uploaded]
			found := false
			for _, e := range ctr.Env {
				found = found || e.Name == "VIDEOGEN_FACE_IMAGE_UPLOADED" && e.Value == want
			}
			if !found {
				t.Errorf("uploaded %v: container %s has no VIDEOGEN_FACE_IMAGE_UPLOADED=%q", uploaded, ctr.Name, want)
			}
			for _, arg := range ctr.Args {
				if strings.Contains(arg, "UPLOADED") {
					t.Errorf("uploaded %v: container %s has the flag %s", uploaded, ctr.Name, arg)
				}
			}
		}
	}
}

func TestHandleRoundTrips(t *testing.T) {
	key := Config{}.jobKey(testWork(videogenv1alpha1.StageAnalyze))
	got, err := parseHandle(handle(key))
	if err != nil || got != key {
		t.Fatalf("parseHandle(handle(%v)) = %v, %v", key, got, err)
	}
	for _, bad := range []string{"", "name", "/name", "ns/", "ns/a/b"} {
		if _, err := parseHandle(bad); err == nil {
			t.Errorf("parseHandle(%q) accepted it", bad)
		}
	}
}

func TestBuildJobPassesInputsAsEnvAndArgs(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageRender)
	job := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w))

	pod := job.Spec.Template.Spec
	for _, ctr := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		if env["VIDEOGEN_STAGE"] != "render" || env["VIDEOGEN_DURATION"] != "15" || env["VIDEOGEN_PREVIOUS"] != `{"boxes":"[1,2]"}` {
			t.Errorf("container %s env = %v", ctr.Name, env)
		}
		if env["VIDEOGEN_SOURCE_VIDEO_URL"] != "https://media.example.com/in.mp4?sig=a$$b" {
			t.Errorf("container %s: a $ in an input must be escaped as $$, got %q", ctr.Name, env["VIDEOGEN_SOURCE_VIDEO_URL"])
		}
	}
	eraser := pod.Containers[1]
	if eraser.Args[0] != "--model=/models/eraser" || !contains(eraser.Args, "--source-video-url=$(VIDEOGEN_SOURCE_VIDEO_URL)") {
		t.Errorf("eraser args = %v", eraser.Args)
	}
	if len(pod.Containers[0].Args) != 0 {
		t.Errorf("only the result container gets input args, log-shipper has %v", pod.Containers[0].Args)
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever || eraser.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("restartPolicy = %s, terminationMessagePolicy = %s", pod.RestartPolicy, eraser.TerminationMessagePolicy)
	}
	if job.Spec.Template.Labels["team"] != "media" || job.Spec.Template.Labels[LabelStage] != "render" {
		t.Errorf("pod labels = %v", job.Spec.Template.Labels)
	}
	if job.Annotations[AnnotationResultContainer] != "eraser" {
		t.Errorf("result container annotation = %q", job.Annotations[AnnotationResultContainer])
	}
	if len(cfg.Capabilities[w.Capability].Template.Spec.Containers[1].Env) != 0 {
		t.Error("buildJob changed the configured template")
	}
}

func TestBuildJobOwnsOnlyInTheTasksNamespace(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := testWork(videogenv1alpha1.StageAnalyze)
	if job := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w)); len(job.OwnerReferences) != 1 {
		t.Fatalf("owner references = %v, want the task", job.OwnerReferences)
	}
	cfg.Namespace = "videogen-jobs"
	job := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w))
	if job.Namespace != "videogen-jobs" || len(job.OwnerReferences) != 0 || job.Labels[LabelTaskNamespace] != "acme" {
		t.Fatalf("job in %s with owners %v and labels %v", job.Namespace, job.OwnerReferences, job.Labels)
	}
}

func TestWorkLabelsLeaveOutATaskNameTooLongForALabel(t *testing.T) {
	w := testWork(videogenv1alpha1.StageAnalyze)
	w.Task = strings.Repeat("a", 64)
	l := workLabels(w)
	if _, ok := l[LabelTask]; ok || l[LabelTaskUID] != w.TaskUID {
		t.Fatalf("labels = %v", l)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A Job ends by its stage's deadline, so a Job whose delete was lost does not run past it; the
// configured limit still bounds a later deadline.
func TestBuildJobEndsByTheStagesDeadline(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg.Clock = clocktesting.NewFakePassiveClock(now)
	cfg.ActiveDeadlineSeconds = ptr.To[int64](1800)
	for _, c := range []struct {
		name     string
		deadline time.Time
		want     int64
	}{
		{"no deadline", time.Time{}, 1800},
		{"a deadline within the limit", now.Add(10*time.Minute + 500*time.Millisecond), 601},
		{"a deadline beyond the limit", now.Add(2 * time.Hour), 1800},
		{"a deadline already past", now.Add(-time.Minute), 1},
	} {
		w := testWork(videogenv1alpha1.StageRender)
		w.Deadline = c.deadline
		job := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w))
		if got := job.Spec.ActiveDeadlineSeconds; got == nil || *got != c.want {
			t.Errorf("%s: activeDeadlineSeconds = %v, want %d", c.name, ptr.Deref(got, -1), c.want)
		}
	}
}

// Whether the template's media is an official Template's goes to the containers as an env var
// only, like VIDEOGEN_FACE_IMAGE_UPLOADED.
func TestBuildJobSaysWhetherTheTemplateMediaIsOfficial(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, official := range []bool{true, false} {
		w := testWork(videogenv1alpha1.StageAnalyze)
		w.TemplateMediaOfficial = official
		pod := cfg.buildJob(w, cfg.Capabilities[w.Capability], cfg.jobKey(w)).Spec.Template.Spec
		want := map[bool]string{true: "true", false: ""}[official]
		for _, ctr := range pod.Containers {
			found := false
			for _, e := range ctr.Env {
				found = found || e.Name == "VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL" && e.Value == want
			}
			if !found {
				t.Errorf("official %v: container %s has no VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL=%q", official, ctr.Name, want)
			}
			for _, arg := range ctr.Args {
				if strings.Contains(arg, "OFFICIAL") || strings.Contains(arg, "official") {
					t.Errorf("official %v: container %s has the flag %s", official, ctr.Name, arg)
				}
			}
		}
	}
}
