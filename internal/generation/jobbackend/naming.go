package jobbackend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// Labels on every Job and, through its pod template, on every pod the backend starts.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	LabelComponent     = "app.kubernetes.io/component"
	LabelTask          = "videogen.dev/task" // left out when the name is too long for a label
	LabelTaskUID       = "videogen.dev/task-uid"
	LabelTaskNamespace = "videogen.dev/task-namespace"
	LabelStage         = "videogen.dev/stage"
	LabelCapability    = "videogen.dev/capability"

	managedBy = "videogen-operator"
	component = "generation-job"
)

// Annotations the backend reads or writes.
const (
	// AnnotationProgress on a running pod is its progress in percent (0–100).
	AnnotationProgress = "videogen.dev/progress"
	// AnnotationWorkKey on a Job is the generation.Work key it was created for.
	AnnotationWorkKey = "videogen.dev/work-key"
	// AnnotationTask on a Job is the task's full name (a label holds at most 63 characters).
	AnnotationTask = "videogen.dev/task"
	// AnnotationResultContainer on a Job names the container whose termination message is read.
	AnnotationResultContainer = "videogen.dev/result-container"
)

// JobName is the Job's name for a work key: "vt-" + 20 hex digits of the key's SHA-256 + "-"
// + stage, at most 31 characters, so a repeated Submit meets the Job it created before.
func JobName(key string, stage videogenv1alpha1.StageName) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("vt-%s-%s", hex.EncodeToString(sum[:])[:20], stage)
}

// jobKey is where the Job for w lives.
func (c Config) jobKey(w generation.Work) types.NamespacedName {
	ns := c.Namespace
	if ns == "" {
		ns = w.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: JobName(w.Key, w.Stage)}
}

// handle is "namespace/name": after the configured namespace changes, the stage is reported lost
// and submitted again in the namespace configured then (movedHandle).
func handle(key types.NamespacedName) string { return key.Namespace + "/" + key.Name }

// workHandle reads h, refusing any handle that is not a Job this backend would have made for
// w: the name derived from w's key, in the namespace it runs Jobs in now. A handle comes from the
// task's status, which others than the manager can write: it must not make the manager read or
// delete any other Job. Not even w's own in the task's namespace, once a namespace of its own is
// configured: the manager's cache of Jobs and pods (CacheByObject) covers only that one, and
// refuses every read elsewhere (movedHandle).
func (c Config) workHandle(w generation.Work, h string) (types.NamespacedName, error) {
	key, err := parseHandle(h)
	if err != nil {
		return key, err
	}
	want := c.jobKey(w)
	if key != want {
		return types.NamespacedName{}, fmt.Errorf("job backend handle %q is not the Job of the %s stage of task %s/%s (%s)",
			h, w.Stage, w.Namespace, w.Task, handle(want))
	}
	return key, nil
}

// movedHandle reads h, a handle workHandle refused, as w's own Job name in a namespace this
// backend no longer uses (its configured namespace changed since the Job was made), and says
// whether it is one.
func (c Config) movedHandle(w generation.Work, h string) (types.NamespacedName, bool) {
	key, err := parseHandle(h)
	return key, err == nil && key.Name == c.jobKey(w).Name
}

func parseHandle(h string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(h, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("job backend handle %q is not namespace/name", h)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// workLabels identify the task and stage a Job or pod belongs to.
func workLabels(w generation.Work) map[string]string {
	l := map[string]string{
		LabelManagedBy:     managedBy,
		LabelComponent:     component,
		LabelTaskUID:       w.TaskUID,
		LabelTaskNamespace: w.Namespace,
		LabelStage:         string(w.Stage),
		LabelCapability:    string(w.Capability),
	}
	if len(validation.IsValidLabelValue(w.Task)) == 0 {
		l[LabelTask] = w.Task
	}
	return l
}

// CacheByObject limits the manager's cache of Jobs and Pods to those this backend starts (and
// to Config.Namespace when set), so the operator does not mirror every pod of the cluster.
// Pass it as cache.Options.ByObject; other code reading Jobs or Pods through the same cache
// would then see only these.
func (c Config) CacheByObject() map[client.Object]cache.ByObject {
	by := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: managedBy, LabelComponent: component})}
	if c.Namespace != "" {
		by.Namespaces = map[string]cache.Config{c.Namespace: {}}
	}
	return map[client.Object]cache.ByObject{&batchv1.Job{}: by, &corev1.Pod{}: by}
}
