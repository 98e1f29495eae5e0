// Package taskview is the public JSON view of a VideoTask: what the REST API returns and what a
// completion webhook carries, so both always agree.
package taskview

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	Webhook     *Webhook    `json:"webhook"`
}

// Webhook is the delivery state of the completion webhook.
type Webhook struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	Attempts      int32      `json:"attempts"`
	LastStatus    *int32     `json:"last_status"`
	LastError     *string    `json:"last_error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
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
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// Of renders a VideoTask.
func Of(t *videogenv1alpha1.VideoTask) Task {
	v := Task{
		ID:         t.Name,
		Object:     "task",
		Capability: string(t.Spec.Capability),
		Status:     Status(t),
		Progress:   t.Status.Progress,
		Phases:     []TaskPhase{},
		Cost:       costOf(t),
		CreatedAt:  t.CreationTimestamp.UTC(),
		TemplateID: optString(t.Spec.TemplateRef),
		Duration:   t.Spec.Duration,
		WebhookURL: optString(t.Spec.WebhookURL),
	}
	if t.Status.Charge != "" {
		c := string(t.Status.Charge)
		v.Charge = &c
	} else if _, admitted := t.AdmittedPrice(); admitted && !t.Status.Phase.Terminal() {
		// Admitted at its create: its price is frozen before the controller writes any status.
		c := string(videogenv1alpha1.ChargeFrozen)
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
	if d := t.Status.Webhook; d != nil {
		v.Webhook = &Webhook{ID: d.ID, Status: strings.ToLower(string(d.State)), Attempts: d.Attempts,
			NextAttemptAt: timeOf(d.NextAttemptAt), DeliveredAt: timeOf(d.DeliveredAt), LastError: optString(d.LastError)}
		if d.LastStatus != 0 {
			v.Webhook.LastStatus = &d.LastStatus
		}
	}
	return v
}

// costOf is status.cost once the controller has priced the task. Until then it is the price
// the apiserver admitted (and froze) the task at, so every answer about a new task, its 202
// included, shows the same cost; a task that ended without being priced never held points and
// shows none.
func costOf(t *videogenv1alpha1.VideoTask) *int64 {
	if t.Status.Cost != nil || t.Status.Phase.Terminal() {
		return t.Status.Cost
	}
	n, ok := t.AdmittedPrice()
	if !ok {
		return nil
	}
	return &n
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Status is the API status of a task: queued, running, succeeded, failed or canceled.
func Status(t *videogenv1alpha1.VideoTask) string {
	switch t.Status.Phase {
	case videogenv1alpha1.TaskRunning:
		return StatusRunning
	case videogenv1alpha1.TaskSucceeded:
		return StatusSucceeded
	case videogenv1alpha1.TaskFailed:
		if c := t.Status.Ending(); c != nil && c.Reason == videogenv1alpha1.ReasonCanceled {
			return StatusCanceled
		}
		return StatusFailed
	}
	return StatusQueued
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
