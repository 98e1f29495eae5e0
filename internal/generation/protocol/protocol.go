// Package protocol holds the wire types of the HTTP backend protocol (docs/backend-protocol.md),
// shared by the operator's client (generation/httpbackend) and the reference worker. It imports
// nothing of Kubernetes or of the operator, so a backend links only what it speaks.
package protocol

import "time"

// Paths of the protocol, relative to the backend's base URL.
const (
	StagesPath = "/v1/stages"
	// CancelByKeyPath stops the stage a key names (POST, a CancelRequest): for a caller that
	// submitted a stage and never learned its id. "cancel" is therefore never a stage id.
	CancelByKeyPath = StagesPath + "/cancel"
)

// CancelRequest is the body of POST /v1/stages/cancel.
type CancelRequest struct {
	// Key is the idempotency key the stage was submitted with.
	Key string `json:"key"`
}

// MaxKeyBytes bounds a key in a cancel by key: the operator's keys
// (<namespace>/<task>/<uid>/<stage>) are under 400 bytes.
const MaxKeyBytes = 1024

// MaxIDBytes bounds a stage id a backend gives (the id in its answer to POST /v1/stages): the
// operator stores it in the task's status and names it in every GET /v1/stages/{id}. An answer
// with a longer id breaks the protocol: the operator stops the stage by its key and fails it.
const MaxIDBytes = 1024

// ReservedID says why id cannot be a stage id ("" if it can): it must be one URL path segment
// of its own, which "." and ".." are not (a client or a proxy cleans them away), nor "cancel",
// the segment of CancelByKeyPath. An answer with such an id breaks the protocol, as a longer
// one does.
func ReservedID(id string) string {
	switch id {
	case ".", "..":
		return "a dot segment, which names another path"
	case "cancel":
		return "the segment of " + CancelByKeyPath
	}
	return ""
}

// StageRequest is the body of POST /v1/stages.
type StageRequest struct {
	// Key makes the submission idempotent: the same key always names the same stage.
	Key              string `json:"key"`
	Capability       string `json:"capability"`
	Stage            string `json:"stage"`
	TemplateID       string `json:"template_id,omitempty"`
	TemplateMediaURL string `json:"template_media_url,omitempty"`
	// TemplateMediaOfficial: TemplateMediaURL is an official Template's media, set by the
	// service's administrators; otherwise it is a template the caller's account made, a URL of
	// the caller's (see Inputs).
	TemplateMediaOfficial bool              `json:"template_media_official,omitempty"`
	Inputs                Inputs            `json:"inputs"`
	Duration              *int32            `json:"duration,omitempty"`
	Previous              map[string]string `json:"previous,omitempty"`
	// Task names the task, for the backend's logs and for sharing it between accounts (its
	// Namespace is the account).
	Task *TaskRef `json:"task,omitempty"`
	// Deadline, if set, is when the backend stops the stage on its own (RFC 3339): a cancel
	// the operator could not deliver then cannot leave the work running for ever.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Inputs are the caller's media, by URL. A backend fetches a URL the caller gave like any
// caller's URL (public addresses only, unless its operator allows more); only the service's own
// media, an uploaded face and an official template's media, may be on the service's network.
type Inputs struct {
	FaceImageURL string `json:"face_image_url,omitempty"`
	// FaceImageUploaded: the caller sent the face inline and FaceImageURL is the service's own
	// copy, a URL the caller never saw. A failure to fetch it is the service's, and its message
	// must not name that URL.
	FaceImageUploaded bool   `json:"face_image_uploaded,omitempty"`
	SourceVideoURL    string `json:"source_video_url,omitempty"`
}

// TaskRef identifies the VideoTask a stage belongs to.
type TaskRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Stage states on the wire.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// StageStatus is the body of every successful stage response.
type StageStatus struct {
	ID       string            `json:"id"`
	Key      string            `json:"key,omitempty"`
	State    string            `json:"state"`
	Progress int32             `json:"progress"`
	Message  string            `json:"message,omitempty"`
	Outputs  map[string]string `json:"outputs,omitempty"`
	Result   *Result           `json:"result,omitempty"`
}

// Result is what a succeeded render produced.
type Result struct {
	URL       string            `json:"url"`
	MediaType string            `json:"media_type"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a stable machine-readable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes the protocol defines.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeUnsupported      = "unsupported"
	CodeUnauthorized     = "unauthorized"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeBusy             = "busy"
	CodeInternal         = "internal"
)
