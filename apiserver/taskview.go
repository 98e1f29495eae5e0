package apiserver

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Task is the API's view of a VideoTask.
type Task struct {
	ID          string      `json:"id"`
	Object      string      `json:"object"`
	Capability  string      `json:"capability"`
	Status      string      `json:"status"`
	Progress    int32       `json:"progress"`
	Phase       *string     `json:"phase"`
	Phases      []TaskPhase `json:"phases"`
	Cost        *int64      `json:"cost"`
	Charge      *string     `json:"charge"`
	Result      *TaskResult `json:"result"`
	Error       *TaskError  `json:"error"`
	CreatedAt   time.Time   `json:"created_at"`
	StartedAt   *time.Time  `json:"started_at"`
	CompletedAt *time.Time  `json:"completed_at"`
	TemplateID  *string     `json:"template_id"`
	Duration    *int32      `json:"duration"`
	WebhookURL  *string     `json:"webhook_url"`
}

// TaskPhase is one of the two generation phases.
type TaskPhase struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Progress int32  `json:"progress"`
}

// TaskResult holds the output URL: video_url for videos, image_url for images.
type TaskResult struct {
	VideoURL  string            `json:"video_url,omitempty"`
	ImageURL  string            `json:"image_url,omitempty"`
	MediaType string            `json:"media_type,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// TaskError says why a task failed.
type TaskError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Task statuses of the API.
const (
	statusQueued    = "queued"
	statusRunning   = "running"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusCanceled  = "canceled"
)

// viewTask renders a VideoTask for the API. price is shown as the cost of a task the
// controller has not priced yet (the apiserver froze it at submission).
func viewTask(t *videogenv1alpha1.VideoTask, price *int64) Task {
	v := Task{
		ID:         t.Name,
		Object:     "task",
		Capability: string(t.Spec.Capability),
		Status:     apiStatus(t),
		Progress:   t.Status.Progress,
		Phases:     []TaskPhase{},
		Cost:       t.Status.Cost,
		CreatedAt:  t.CreationTimestamp.UTC(),
		TemplateID: optString(t.Spec.TemplateRef),
		Duration:   t.Spec.Duration,
		WebhookURL: optString(t.Spec.WebhookURL),
	}
	if v.Cost == nil {
		v.Cost = price
	}
	if t.Status.Charge != "" {
		c := string(t.Status.Charge)
		v.Charge = &c
	}
	for _, name := range videogenv1alpha1.Stages {
		ph := TaskPhase{Name: string(name), Status: "pending"}
		for _, st := range t.Status.Stages {
			if st.Name == name {
				ph.Status, ph.Progress = lower(st.State), st.Progress
			}
		}
		if ph.Status == "running" && v.Phase == nil {
			n := string(name)
			v.Phase = &n
		}
		v.Phases = append(v.Phases, ph)
	}
	if t.Status.StartedAt != nil {
		at := t.Status.StartedAt.UTC()
		v.StartedAt = &at
	}
	if t.Status.CompletedAt != nil {
		at := t.Status.CompletedAt.UTC()
		v.CompletedAt = &at
	}
	if r := t.Status.Result; r != nil {
		v.Result = &TaskResult{MediaType: r.MediaType, Metadata: r.Metadata}
		if t.Spec.Capability == videogenv1alpha1.CapabilityPose {
			v.Result.ImageURL = r.URL
		} else {
			v.Result.VideoURL = r.URL
		}
	}
	if e := t.Status.Error; e != nil {
		v.Error = &TaskError{Code: e.Code, Message: e.Message}
	}
	return v
}

func apiStatus(t *videogenv1alpha1.VideoTask) string {
	switch t.Status.Phase {
	case videogenv1alpha1.TaskRunning:
		return statusRunning
	case videogenv1alpha1.TaskSucceeded:
		return statusSucceeded
	case videogenv1alpha1.TaskFailed:
		if c := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionComplete); c != nil && c.Reason == videogenv1alpha1.ReasonCanceled {
			return statusCanceled
		}
		return statusFailed
	}
	return statusQueued
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func lower(s videogenv1alpha1.StageState) string {
	switch s {
	case videogenv1alpha1.StageRunning:
		return "running"
	case videogenv1alpha1.StageSucceeded:
		return "succeeded"
	case videogenv1alpha1.StageFailed:
		return "failed"
	case videogenv1alpha1.StageCanceled:
		return "canceled"
	}
	return "pending"
}
