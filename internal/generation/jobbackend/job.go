package jobbackend

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// envPrefix starts every variable the backend sets; templates may not set their own.
const envPrefix = "VIDEOGEN_"

// exitCodeInvalidInput is the exit code that fails the Job at once: the inputs are unusable,
// so retrying the pod cannot help.
const exitCodeInvalidInput = 2

// inputVar is one input handed to the containers, as an env var and optionally as a flag.
type inputVar struct{ env, flag, value string }

func inputVars(w generation.Work) []inputVar {
	previous := w.Previous
	if previous == nil {
		previous = map[string]string{}
	}
	previousJSON, _ := json.Marshal(previous) // a map of strings always marshals
	uploaded, official := "", ""
	if w.FaceImageUploaded {
		uploaded = "true"
	}
	if w.TemplateMediaOfficial {
		official = "true"
	}
	duration := ""
	if w.Duration != nil {
		duration = strconv.Itoa(int(*w.Duration))
	}
	return []inputVar{
		{"VIDEOGEN_NAMESPACE", "namespace", w.Namespace},
		{"VIDEOGEN_TASK", "task", w.Task},
		{"VIDEOGEN_TASK_UID", "task-uid", w.TaskUID},
		{"VIDEOGEN_STAGE", "stage", string(w.Stage)},
		{"VIDEOGEN_CAPABILITY", "capability", string(w.Capability)},
		{"VIDEOGEN_TEMPLATE_ID", "template-id", w.TemplateID},
		{"VIDEOGEN_TEMPLATE_MEDIA_URL", "template-media-url", w.TemplateMediaURL},
		// No flag, as for VIDEOGEN_FACE_IMAGE_UPLOADED below.
		{"VIDEOGEN_TEMPLATE_MEDIA_OFFICIAL", "", official},
		{"VIDEOGEN_FACE_IMAGE_URL", "face-image-url", w.Inputs.FaceImageURL},
		// No flag: a container given the inputs as flags may refuse one it does not know.
		{"VIDEOGEN_FACE_IMAGE_UPLOADED", "", uploaded},
		{"VIDEOGEN_SOURCE_VIDEO_URL", "source-video-url", w.Inputs.SourceVideoURL},
		{"VIDEOGEN_DURATION", "duration", duration},
		{"VIDEOGEN_PREVIOUS", "previous", string(previousJSON)},
	}
}

// maxArgStrlen is Linux's MAX_ARG_STRLEN (32 pages of 4 KiB): execve refuses any one argument
// or environment string ("NAME=value") longer than this, its NUL included, and the container
// then never starts (StartError, "argument list too long"), at every retry of the Job.
const maxArgStrlen = 32 * 4096

// checkExecLimit refuses work with an input that would not fit in one environment string (or
// argument, with InputArgs) of a container: the analyze outputs of another backend, say, which
// may reach the controller's 256 KiB where a Job's own cannot pass its 4 KiB termination message.
func checkExecLimit(w generation.Work, cc CapabilityConfig) error {
	for _, v := range inputVars(w) {
		n := len(v.env) + len("=") + len(v.value) + 1
		if cc.InputArgs && v.flag != "" {
			n = max(n, len("--")+len(v.flag)+len("=")+len(v.value)+1)
		}
		if n > maxArgStrlen {
			return fmt.Errorf("the %s input of the %s stage is %d bytes, more than a container's environment variable may hold (%d bytes)",
				v.env, w.Stage, len(v.value), maxArgStrlen-len(v.env)-2)
		}
	}
	return nil
}

// inputEnv comes first in every container so the template's own env may refer to it as $(NAME).
func inputEnv(vars []inputVar) []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(vars)+2)
	for _, v := range vars {
		// The kubelet expands $(NAME) in env values; $$ keeps a caller's "$" literal.
		env = append(env, corev1.EnvVar{Name: v.env, Value: strings.ReplaceAll(v.value, "$", "$$")})
	}
	// The pod's own name, so a container can annotate its pod with its progress.
	return append(env,
		corev1.EnvVar{Name: "VIDEOGEN_POD_NAME", ValueFrom: fieldRef("metadata.name")},
		corev1.EnvVar{Name: "VIDEOGEN_POD_NAMESPACE", ValueFrom: fieldRef("metadata.namespace")},
	)
}

// inputArgs refer to the env vars, so the kubelet substitutes the values and nothing is quoted twice.
func inputArgs(vars []inputVar) []string {
	args := make([]string, 0, len(vars))
	for _, v := range vars {
		if v.flag != "" {
			args = append(args, "--"+v.flag+"=$("+v.env+")")
		}
	}
	return args
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

// buildJob is the Job that runs w's stage at key from the capability's pod template.
func (c Config) buildJob(w generation.Work, cc CapabilityConfig, key types.NamespacedName) *batchv1.Job {
	vars := inputVars(w)
	env := inputEnv(vars)
	resultContainer := cc.resultContainer()

	tmpl := cc.Template.DeepCopy()
	tmpl.Labels = merged(tmpl.Labels, workLabels(w))
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	for i := range tmpl.Spec.InitContainers {
		ctr := &tmpl.Spec.InitContainers[i]
		ctr.Env = append(append([]corev1.EnvVar{}, env...), ctr.Env...)
	}
	for i := range tmpl.Spec.Containers {
		ctr := &tmpl.Spec.Containers[i]
		ctr.Env = append(append([]corev1.EnvVar{}, env...), ctr.Env...)
		// A crashing container that wrote no message still explains itself with its last log lines.
		ctr.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
		if cc.InputArgs && ctr.Name == resultContainer {
			ctr.Args = append(ctr.Args, inputArgs(vars)...)
		}
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      key.Name,
			Namespace: key.Namespace,
			Labels:    workLabels(w),
			Annotations: map[string]string{
				AnnotationWorkKey:         w.Key,
				AnnotationTask:            w.Task,
				AnnotationResultContainer: resultContainer,
			},
		},
		Spec: batchv1.JobSpec{
			ActiveDeadlineSeconds:   c.activeDeadlineSeconds(w),
			BackoffLimit:            c.BackoffLimit,
			TTLSecondsAfterFinished: c.TTLSecondsAfterFinished,
			PodFailurePolicy:        podFailurePolicy(),
			Template:                *tmpl,
		},
	}
	// Owner references cannot cross namespaces: a Job elsewhere is only labelled with its task.
	if key.Namespace == w.Namespace {
		// No TTL: its pod's termination message is the only copy of the result, and a TTL
		// counts from the Job's end whether or not the manager (down, say) has read it. The
		// garbage collector deletes the Job with its task instead, which the finished-task
		// collector deletes only once it ended, so after the result was read.
		job.Spec.TTLSecondsAfterFinished = nil
		job.OwnerReferences = []metav1.OwnerReference{{
			APIVersion:         videogenv1alpha1.GroupVersion.String(),
			Kind:               "VideoTask",
			Name:               w.Task,
			UID:                types.UID(w.TaskUID),
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}}
	}
	return job
}

// activeDeadlineSeconds bounds the Job by the configured limit and by w's deadline, so a Job
// whose cancel was lost stops by then. It counts from the Job's start, a moment after now. A
// deadline already past leaves one second: the Job fails at once with DeadlineExceeded.
func (c Config) activeDeadlineSeconds(w generation.Work) *int64 {
	if w.Deadline.IsZero() {
		return c.ActiveDeadlineSeconds
	}
	now := time.Now()
	if c.Clock != nil {
		now = c.Clock.Now()
	}
	left := max(int64(math.Ceil(w.Deadline.Sub(now).Seconds())), 1)
	if c.ActiveDeadlineSeconds != nil && *c.ActiveDeadlineSeconds < left {
		return c.ActiveDeadlineSeconds
	}
	return &left
}

// podFailurePolicy fails the Job at once on exitCodeInvalidInput and does not count evicted or
// preempted pods (common on shared GPU nodes) against the backoff limit.
func podFailurePolicy() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{exitCodeInvalidInput}},
		},
		{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		},
	}}
}

func merged(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}
