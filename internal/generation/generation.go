// Package generation is the contract between the VideoTask controller and the backends that
// actually produce media. A task runs two stages (analyze, then render); each stage is submitted
// to a backend, observed until it ends, and cancelled if the task is abandoned.
package generation

import (
	"context"
	"errors"
	"fmt"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Work is everything a backend needs to run one stage of one task.
type Work struct {
	// Key identifies this stage of this task uniquely and stably (it includes the task's UID).
	// Backends use it to make Submit idempotent: a controller that crashed after submitting
	// submits again with the same key.
	Key        string
	Namespace  string
	Task       string
	TaskUID    string
	Capability videogenv1alpha1.Capability
	Stage      videogenv1alpha1.StageName

	// TemplateID is the official template name or the ushort_ id; TemplateMediaURL its media.
	TemplateID       string
	TemplateMediaURL string
	// TemplateMediaOfficial: TemplateMediaURL is an official Template's, set by the service's
	// administrators, not a ShortTemplate's target_url set by the caller's account.
	TemplateMediaOfficial bool
	Inputs                videogenv1alpha1.TaskInputs
	// FaceImageUploaded: Inputs.FaceImageURL is the service's copy of a face the caller sent
	// inline, so a failure to fetch it must not show that URL (AnnotationFaceImageUploaded).
	FaceImageUploaded bool
	Duration          *int32

	// Previous holds the analyze stage's outputs when rendering.
	Previous map[string]string

	// Deadline is when the backend stops the stage on its own, whatever became of the
	// controller's cancel (zero: never). The controller's own timeout comes first.
	Deadline time.Time
}

// State of a stage at its backend.
type State string

const (
	Running   State = "Running"
	Succeeded State = "Succeeded"
	Failed    State = "Failed"
)

// Observation is what a backend reports about a stage.
type Observation struct {
	State State
	// Progress of the stage in percent.
	Progress int32
	// Message explains a failure, or says what the stage is doing.
	Message string
	// Outputs of a succeeded analyze stage, handed to render.
	Outputs map[string]string
	// Result of a succeeded render stage.
	Result *videogenv1alpha1.TaskResult
}

// Backend runs stages.
type Backend interface {
	// Submit starts a stage and returns the backend's handle for it. Submitting the same
	// Work.Key twice must not start the work twice.
	Submit(ctx context.Context, w Work) (handle string, err error)
	// Observe reports the stage's state.
	Observe(ctx context.Context, w Work, handle string) (Observation, error)
	// Cancel stops the stage's work. Cancelling finished or unknown work is not an error.
	// An empty handle means the caller may have submitted w without learning the handle:
	// a backend that can find work by w.Key stops it, others do nothing.
	Cancel(ctx context.Context, w Work, handle string) error
}

// Router chooses the backend for a capability.
type Router interface {
	// Route returns the backend's name and the backend, or ok=false if none serves c.
	Route(c videogenv1alpha1.Capability) (name string, b Backend, ok bool)
}

// Routes is a Router from a fixed map.
type Routes map[videogenv1alpha1.Capability]Named

// Named is a backend with the name shown in task status and events.
type Named struct {
	Name    string
	Backend Backend
}

// Route implements Router.
func (r Routes) Route(c videogenv1alpha1.Capability) (string, Backend, bool) {
	n, ok := r[c]
	if !ok || n.Backend == nil {
		return "", nil, false
	}
	return n.Name, n.Backend, true
}

// Named returns the backend configured under name (the name stages record), or ok=false.
func (r Routes) Named(name string) (Backend, bool) {
	for _, n := range r {
		if n.Name == name && n.Backend != nil {
			return n.Backend, true
		}
	}
	return nil, false
}

// AtServer returns a backend configured to talk to server (see ServerOf), and its name, or
// ok=false; of several, the one under the least name, so that every call makes the same choice.
func (r Routes) AtServer(server string) (string, Backend, bool) {
	var name string
	var found Backend
	for _, n := range r {
		if n.Backend != nil && ServerOf(n.Backend) == server && (found == nil || n.Name < name) {
			name, found = n.Name, n.Backend
		}
	}
	return name, found, found != nil
}

// PermanentError marks a backend error that retrying cannot fix (a rejected input): the stage
// fails at once. Any other error from Submit or Observe is retried with backoff.
type PermanentError struct {
	Err error
	// Refusal, when set, is what the backend said of the input, for the task's caller: Err
	// also carries how it was said (the method, path and status), for the stage and the log.
	Refusal string
	// lost: the backend no longer knows the stage (Lost); errors.Is(e, ErrStageLost) says so.
	lost bool
}

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStageLost) true of an error made by Lost.
func (e *PermanentError) Is(target error) bool { return e.lost && target == ErrStageLost }

// ErrStageLost is what errors.Is finds in an Observe error when the backend no longer knows the
// stage it was given a handle for: a worker that keeps its stages in memory restarted, say. The
// stage will never finish under that handle, but its input was fine: the controller may submit
// it again under the same Work.Key, which a refused input (Refused) must not be.
var ErrStageLost = errors.New("the backend no longer knows the stage")

// Lost wraps err, an Observe error, as a PermanentError that says the backend lost the stage.
func Lost(err error) error { return &PermanentError{Err: err, lost: true} }

// IsLost reports whether err says the backend lost the stage (see ErrStageLost).
func IsLost(err error) bool { return errors.Is(err, ErrStageLost) }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Refused wraps err as a PermanentError whose refusal, for the task's caller, is refusal.
func Refused(err error, refusal string) error { return &PermanentError{Err: err, Refusal: refusal} }

// RefusalOf is what a backend said of a refused input, or "" when err does not say.
func RefusalOf(err error) string {
	var p *PermanentError
	if errors.As(err, &p) {
		return p.Refusal
	}
	return ""
}

// IsPermanent reports whether err is, or wraps, a PermanentError.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// WorkKey is the stable key of one stage of one task.
func WorkKey(namespace, task, uid string, stage videogenv1alpha1.StageName) string {
	return fmt.Sprintf("%s/%s/%s/%s", namespace, task, uid, stage)
}

// ReroutedKey is the work key of a stage moved to another backend reroutes times after it was
// cancelled at the one it ran at (StageStatus.Reroutes): key itself before the first, then
// key + "-r<reroutes>". A backend the stage was cancelled at under a key answers a Submit
// under that key with the cancelled stage (idempotent by key), so a stage that comes back to
// it (a route change rolled back) is submitted under a key it has never seen.
func ReroutedKey(key string, reroutes int32) string {
	if reroutes <= 0 {
		return key
	}
	return fmt.Sprintf("%s-r%d", key, reroutes)
}

// Server is implemented by a backend whose handles are its server's own ids, meaningless to
// another server configured under the same name later (an HTTP backend's stage ids).
type Server interface {
	// Server names the server the backend talks to (an HTTP backend's base URL).
	Server() string
}

// ServerOf is b's Server, or "" when b does not say (a test's backend). A Job backend says
// "job", its kind only: its handles name the namespace they live in, and it tells a handle
// from another namespace itself.
func ServerOf(b Backend) string {
	if s, ok := b.(Server); ok {
		return s.Server()
	}
	return ""
}
