package v1alpha1

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationCancelRequested asks the controller to cancel a task and refund its points. The spec
// stays immutable; a request to stop is metadata, as Flux does with reconcile requests.
const AnnotationCancelRequested = "videogen.dev/cancel-requested"

// AnnotationAdmission is the ledger's admission of a task it created for the REST API: the
// price it froze, signed ("<price>:<signature>") so that no one else can write one. Such a task
// holds its price from its creation on.
const AnnotationAdmission = "videogen.dev/admission"

// AnnotationFaceImageUploaded ("true") marks a task whose face the caller sent inline to the
// REST API: inputs.faceImageURL is the service's own copy, a URL the caller never saw, so a
// failure to read it is told as the service's, without that URL. The apiserver sets it; the
// controller passes it to the backend (face_image_uploaded).
const AnnotationFaceImageUploaded = "videogen.dev/face-image-uploaded"

// FinalizerCancelWork is on a task while a stage runs at a backend: deleting the task cancels
// that work before the task goes.
const FinalizerCancelWork = "videogen.dev/cancel-work"

// TaskPhase is where a task is in its life.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Succeeded;Failed
type TaskPhase string

const (
	// TaskPending: created, not yet priced and frozen (tasks made with kubectl, for a moment).
	TaskPending TaskPhase = "Pending"
	// TaskQueued: points frozen, waiting for a backend to accept the first stage.
	TaskQueued TaskPhase = "Queued"
	// TaskRunning: a backend is working on one of the stages.
	TaskRunning TaskPhase = "Running"
	// TaskSucceeded: both stages done, points deducted, result available.
	TaskSucceeded TaskPhase = "Succeeded"
	// TaskFailed: the task ended without a result; any frozen points were refunded.
	TaskFailed TaskPhase = "Failed"
)

// Terminal reports whether no further transition can happen.
func (p TaskPhase) Terminal() bool { return p == TaskSucceeded || p == TaskFailed }

// FieldStatusClosed is the field selector name of status.closed (see VideoTaskStatus.Closed).
const FieldStatusClosed = "status.closed"

// StageName names one of the two generation stages.
// +kubebuilder:validation:Enum=analyze;render
type StageName string

const (
	// StageAnalyze is phase 1: inspect the inputs (detect faces, find overlays).
	StageAnalyze StageName = "analyze"
	// StageRender is phase 2: produce the output media.
	StageRender StageName = "render"
)

// Stages lists the generation stages in the order they run.
var Stages = []StageName{StageAnalyze, StageRender}

// StageState is the state of one stage at its backend.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Canceled
type StageState string

const (
	StagePending   StageState = "Pending"
	StageRunning   StageState = "Running"
	StageSucceeded StageState = "Succeeded"
	StageFailed    StageState = "Failed"
	StageCanceled  StageState = "Canceled"
)

// ChargeState says where the task's points are.
// +kubebuilder:validation:Enum=Frozen;Deducted;Refunded
type ChargeState string

const (
	ChargeFrozen   ChargeState = "Frozen"
	ChargeDeducted ChargeState = "Deducted"
	ChargeRefunded ChargeState = "Refunded"
)

// VideoTask condition types and the reasons a user sees.
const (
	// ConditionAccepted: the task was priced and its points frozen.
	ConditionAccepted = "Accepted"
	// ConditionDispatched: a backend accepted the current stage.
	ConditionDispatched = "Dispatched"
	// ConditionSucceeded is True once the task succeeded: its result is there and its price
	// deducted. It is never set on a task that did not succeed, so that
	// `kubectl wait --for=condition=Succeeded` waits for a result only (as Job's Complete).
	ConditionSucceeded = "Succeeded"
	// ConditionFailed is True once the task ended without a result (rejected, failed, timed
	// out or cancelled); its reason says which, and any frozen points were refunded.
	ConditionFailed = "Failed"

	ReasonFrozen              = "PointsFrozen"
	ReasonInsufficientBalance = "InsufficientBalance"
	ReasonAccountSuspended    = "AccountSuspended"
	// ReasonAccountClosing: the account is being deleted and takes no new tasks.
	ReasonAccountClosing = "AccountClosing"
	ReasonInvalidRequest = "InvalidRequest"
	ReasonNoBackend      = "NoBackend"
	// ReasonNoMedia: a template whose capability needs media has none (made before mediaURL
	// was required of it).
	ReasonNoMedia            = "NoMedia"
	ReasonBackendAccepted    = "BackendAccepted"
	ReasonBackendUnavailable = "BackendUnavailable"
	ReasonSucceeded          = "Succeeded"
	ReasonStageFailed        = "StageFailed"
	// ReasonTemplateUnavailable: the task's template was deleted (or no longer serves its
	// capability) while it ran; nothing more can be rendered from it.
	ReasonTemplateUnavailable = "TemplateUnavailable"
	ReasonTimedOut            = "TimedOut"
	ReasonCanceled            = "Canceled"
	// ReasonEndedByHand: the task's status was ended by whoever may write task statuses (a
	// cluster administrator), without the ending the operator writes; the operator adds it.
	ReasonEndedByHand = "EndedByHand"
)

// TaskInputs are the media a task works on. Large inputs are stored elsewhere and referred to by
// URL, never embedded in the object.
type TaskInputs struct {
	// FaceImageURL is the face to place, required for video.short and image.pose.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	FaceImageURL string `json:"faceImageURL,omitempty"`

	// SourceVideoURL is the video to clean, required for video.eraser.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	SourceVideoURL string `json:"sourceVideoURL,omitempty"`
}

// VideoTaskSpec is what the caller asked for. It cannot change after creation.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; create a new task instead"
// +kubebuilder:validation:XValidation:rule="!(self.capability in ['video.short', 'image.pose']) || (has(self.templateRef) && has(self.inputs) && has(self.inputs.faceImageURL))",message="video.short and image.pose need templateRef and inputs.faceImageURL"
// +kubebuilder:validation:XValidation:rule="self.capability != 'video.eraser' || (has(self.inputs) && has(self.inputs.sourceVideoURL))",message="video.eraser needs inputs.sourceVideoURL"
// +kubebuilder:validation:XValidation:rule="self.capability != 'video.template' || (has(self.templateRef) && has(self.duration))",message="video.template needs templateRef and duration"
type VideoTaskSpec struct {
	// Capability is the kind of generation to run.
	// +required
	Capability Capability `json:"capability"`

	// TemplateRef is the template to use, required for video.short, video.template and
	// image.pose: an official Template's name, or a ShortTemplate of this namespace: its id
	// (ushort_…), or, in a task made with kubectl, its object name. An official Template of the
	// same name comes first.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TemplateRef string `json:"templateRef,omitempty"`

	// Inputs are the caller's media.
	// +optional
	Inputs TaskInputs `json:"inputs,omitempty"`

	// Duration of the video to render in seconds, required for video.template: within the
	// template's [minDuration, maxDuration] when it is adjustable (durationPrices price it); a
	// fixed template renders it at its fixed price. The other capabilities ignore it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	Duration *int32 `json:"duration,omitempty"`

	// WebhookURL receives the task object when it reaches a terminal phase.
	// +kubebuilder:validation:Pattern=`^https?://[^\x00-\x1f\x7f]*$`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	WebhookURL string `json:"webhookURL,omitempty"`

	// Timeout bounds the whole task; past it the task fails with TimedOut and is refunded.
	// Defaults to the manager's --task-timeout; at most 720h (30 days), for which its points
	// stay frozen.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,4}(\\\\.[0-9]*)?h|[0-9]{1,6}(\\\\.[0-9]*)?m|[0-9]{1,8}(\\\\.[0-9]*)?(s|ms|us|µs|ns)){1,7}$') && duration(self) > duration('0s') && duration(self) <= duration('720h')",message="timeout must be a positive duration of at most 720h (30 days), e.g. \"10m\" or \"1h30m\""
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// StageStatus is the state of one generation stage at its backend.
type StageStatus struct {
	// Name of the stage.
	// +required
	Name StageName `json:"name"`
	// State of the stage.
	// +required
	State StageState `json:"state"`
	// Backend that runs the stage.
	// +optional
	Backend string `json:"backend,omitempty"`
	// Server is which server, of those configured under Backend's name over time, issued
	// Handle: an http backend's URL. A handle means nothing to another server: one whose
	// Server differs is submitted again to the backend configured now, as when its name
	// changed. "job" for a Job backend (its handles name their namespace themselves: a
	// namespace change is not a change of server); empty in a status written before this
	// field: then the server configured under Backend's name is taken for the one that issued
	// Handle.
	// +optional
	Server string `json:"server,omitempty"`
	// Handle is the backend's id for this stage's work.
	// +optional
	Handle string `json:"handle,omitempty"`
	// Progress in percent, as last reported by the backend.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int32 `json:"progress,omitempty"`
	// Message is the backend's last word on the stage (an error, a note).
	// +optional
	Message string `json:"message,omitempty"`
	// Outputs are what the stage hands to the next one (e.g. analysis results).
	// +optional
	Outputs map[string]string `json:"outputs,omitempty"`
	// StartedAt is when the backend accepted the stage.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the stage ended.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Resubmissions counts how often the stage was submitted again because its backend no
	// longer knew it (a worker that restarted forgets its stages). Each one starts the stage's
	// work over, under the same key; past 2 the task fails and its points are refunded.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Resubmissions int32 `json:"resubmissions,omitempty"`
	// Reroutes counts how often the stage was moved to another backend (or server) after it
	// was cancelled at the one it ran at (the routes changed across a restart). The stage's
	// work key carries it from the first on ("-r1", "-r2", …): a backend the stage was
	// cancelled at, asked again under the key it cancelled, would answer with that cancelled
	// stage (Submit is idempotent by key) when a route change is rolled back.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Reroutes int32 `json:"reroutes,omitempty"`
}

// TaskResult is what a succeeded task produced.
type TaskResult struct {
	// URL of the produced media.
	// +required
	URL string `json:"url"`
	// MediaType of the output, e.g. video/mp4 or image/png.
	// +optional
	MediaType string `json:"mediaType,omitempty"`
	// Metadata about the output (duration, width, height, fps…).
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// TaskError explains why a task failed, with a stable code for programs.
type TaskError struct {
	// Code is stable and machine-readable, e.g. insufficient_balance, timed_out, stage_failed.
	// +required
	Code string `json:"code"`
	// Message is for people.
	// +required
	Message string `json:"message"`
}

// WebhookState is where the completion webhook of a task stands.
// +kubebuilder:validation:Enum=Pending;Delivered;Stopped;Failed
type WebhookState string

const (
	// WebhookPending: not delivered yet; another attempt is scheduled.
	WebhookPending WebhookState = "Pending"
	// WebhookDelivered: the receiver answered 2xx.
	WebhookDelivered WebhookState = "Delivered"
	// WebhookStopped: the receiver answered 410 Gone, or the URL names an address the manager
	// never calls (a literal private one), or the URL is one it never calls at all (it does not
	// parse, or carries credentials: a task made with kubectl); no more attempts.
	WebhookStopped WebhookState = "Stopped"
	// WebhookFailed: every scheduled attempt failed.
	WebhookFailed WebhookState = "Failed"
)

// WebhookDelivery is the state of the completion webhook (Standard Webhooks) of a task.
type WebhookDelivery struct {
	// ID is the webhook-id, the same on every attempt so receivers can deduplicate.
	// +required
	ID string `json:"id"`
	// State of the delivery.
	// +required
	State WebhookState `json:"state"`

	DeliveryAttempts `json:",inline"`
}

// VideoTaskStatus is the observed state of a VideoTask. The ledger reads a task's points from
// it (a settled charge or a terminal phase ends the task's hold), so the rules below refuse an
// edit (kubectl edit --subresource=status) that would make it say something the books do not:
// only the controller ends a task, and a task is stopped by cancelling it.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.charge) || oldSelf.charge == 'Frozen' || (has(self.charge) && self.charge == oldSelf.charge)",message="a settled charge (Deducted or Refunded) never changes"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.closed) || !oldSelf.closed || (has(self.closed) && self.closed)",message="a closed task stays closed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cost) || (has(self.cost) && self.cost == oldSelf.cost)",message="cost is the price the task was accepted at and never changes"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.accountUID) || (has(self.accountUID) && self.accountUID == oldSelf.accountUID)",message="accountUID is the account the task's points were frozen in and never changes"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || !(oldSelf.phase in ['Succeeded', 'Failed']) || (has(self.phase) && self.phase == oldSelf.phase)",message="a finished task's phase (Succeeded or Failed) never changes; create a new task to run it again"
// +kubebuilder:validation:XValidation:rule="!has(self.charge) || self.charge == 'Frozen' || (has(self.phase) && self.phase == (self.charge == 'Deducted' ? 'Succeeded' : 'Failed'))",message="only the controller settles a task's points: charge Deducted comes with phase Succeeded and Refunded with Failed; to stop a task, cancel it (annotation videogen.dev/cancel-requested=true)"
// +kubebuilder:validation:XValidation:rule="!has(self.closed) || !self.closed || (has(self.phase) && self.phase in ['Succeeded', 'Failed'])",message="only a finished task (Succeeded or Failed) is closed"
// +kubebuilder:validation:XValidation:rule="!has(self.closed) || !self.closed || !has(self.stages) || self.stages.all(s, s.state != 'Running')",message="a task is closed only once none of its stages runs (a closed task leaves the operator's view, and a running stage would run on unstopped); leave closed to the operator: it stops the stages of a task that ended, then closes it"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || !(self.phase in ['Succeeded', 'Failed']) || (self.phase == 'Succeeded' ? (has(self.charge) && self.charge == 'Deducted') : (!has(self.charge) || self.charge == 'Refunded'))",message="only the controller ends a task: phase Succeeded comes with charge Deducted and Failed with Refunded (or none); to stop a task, cancel it (annotation videogen.dev/cancel-requested=true)"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'Succeeded' || (has(self.result) && size(self.result.url) > 0) || (oldSelf.hasValue() && has(oldSelf.value().phase) && oldSelf.value().phase == 'Succeeded')",optionalOldSelf=true,message="only the controller ends a task: phase Succeeded comes with the result its backend made (status.result.url); to stop a task, cancel it (annotation videogen.dev/cancel-requested=true)"
type VideoTaskStatus struct {
	// Phase of the task.
	// +optional
	Phase TaskPhase `json:"phase,omitempty"`
	// Cost is the price in points: frozen while running, deducted on success.
	// +optional
	Cost *int64 `json:"cost,omitempty"`
	// TemplateMediaURL is the template's media as it was when the task was accepted: every
	// stage runs on it, as the task keeps its price, whatever edits the template gets later.
	// +optional
	TemplateMediaURL string `json:"templateMediaURL,omitempty"`
	// TemplateMediaOfficial says templateMediaURL is an official Template's, set by the
	// service's administrators, and not a ShortTemplate's target_url: only such media (and a
	// face uploaded through the REST API) may be fetched from the service's own network.
	// +optional
	TemplateMediaOfficial bool `json:"templateMediaOfficial,omitempty"`
	// AccountUID is the PointAccount the task's points were frozen in (and deducted from or
	// refunded to), recorded with its hold and never changed: after an account is closed and
	// created again in the namespace, it says which of the two a task was charged to. Empty
	// for a task that never held points, or that an older operator accepted.
	// +optional
	AccountUID types.UID `json:"accountUID,omitempty"`
	// Charge says where the task's points are: Frozen while it runs; when it ends, Deducted
	// (the account's spent already counts it) or Refunded, written with its terminal phase.
	// A settled charge never changes.
	// +optional
	Charge ChargeState `json:"charge,omitempty"`
	// Progress in percent over both stages.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int32 `json:"progress,omitempty"`
	// Stages are the two generation stages.
	// +listType=map
	// +kubebuilder:validation:MaxItems=2
	// +listMapKey=name
	// +optional
	Stages []StageStatus `json:"stages,omitempty"`
	// Result of a succeeded task.
	// +optional
	Result *TaskResult `json:"result,omitempty"`
	// Error of a failed task.
	// +optional
	Error *TaskError `json:"error,omitempty"`
	// StartedAt is when the first stage was accepted by a backend.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the task reached a terminal phase.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Webhook is the delivery of the completion webhook to spec.webhookURL.
	// +optional
	Webhook *WebhookDelivery `json:"webhook,omitempty"`
	// Closed is true once nothing is left to do for the task but its deletion after the
	// finished-task TTL: it is terminal, its points are settled, and its completion webhook was
	// delivered or given up. Select such tasks with --field-selector status.closed=true.
	// +optional
	Closed bool `json:"closed,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted (priced and frozen), Dispatched (a backend took the current stage),
	// and at the end either Succeeded or Failed, whose reason says why the task failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vt,categories=videogen
// +kubebuilder:printcolumn:name="Capability",type=string,JSONPath=`.spec.capability`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Cost",type=integer,JSONPath=`.status.cost`
// +kubebuilder:printcolumn:name="Charge",type=string,JSONPath=`.status.charge`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].reason`
// +kubebuilder:printcolumn:name="Webhook",type=string,JSONPath=`.status.webhook.state`,priority=1
// +kubebuilder:printcolumn:name="Dispatch",type=string,JSONPath=`.status.conditions[?(@.type=="Dispatched")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.status.closed`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`

// VideoTask is one generation request, billed to the account of its namespace.
type VideoTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the caller asked for: the capability, its template and inputs. It cannot
	// change after creation; create a new task instead.
	// +required
	Spec VideoTaskSpec `json:"spec"`
	// status is the task as the controller observes it: its phase, its price and where its
	// points are (charge), each stage at its backend, and the result or the error.
	// +optional
	Status VideoTaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// VideoTaskList contains a list of VideoTask.
type VideoTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VideoTask `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VideoTask{}, &VideoTaskList{})
}

// AdmittedPrice reads the price of the task's admission annotation without checking its
// signature: for showing the cost of a new task before its status does, never for moving points
// (the ledger checks the signature).
func (t *VideoTask) AdmittedPrice() (int64, bool) {
	price, _, ok := strings.Cut(t.Annotations[AnnotationAdmission], ":")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(price, 10, 64)
	return p, err == nil && p >= 0
}

// Ending is the condition that ended the task (Succeeded or Failed, whichever is True), or nil
// while it runs.
func (s *VideoTaskStatus) Ending() *metav1.Condition {
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if (c.Type == ConditionSucceeded || c.Type == ConditionFailed) && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}
