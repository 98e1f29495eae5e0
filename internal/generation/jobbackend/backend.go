package jobbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// cacheGrace is how long a Job or pod missing from a cache-backed client is taken for cache lag
// rather than deletion.
const cacheGrace = time.Minute

// Backend runs each stage as a batch/v1 Job. It implements generation.Backend.
type Backend struct {
	client client.Client
	cfg    Config

	mu sync.Mutex
	// submitted remembers when this process created each Job, to tell cache lag from deletion.
	submitted map[string]time.Time
}

var _ generation.Backend = (*Backend)(nil)

// New returns a Backend that creates and reads Jobs and Pods through c (the manager's client
// is fine; see Config.CacheByObject). Unset Job limits in cfg take their defaults.
func New(c client.Client, cfg Config) (*Backend, error) {
	if c == nil {
		return nil, errors.New("job backend: a Kubernetes client is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("job backend config: %w", err)
	}
	return &Backend{client: c, cfg: cfg, submitted: map[string]time.Time{}}, nil
}

// Server implements generation.Server: "job", the backend's kind, never its namespace. A
// stage's handle names its Job's namespace, and a handle from a namespace this backend no
// longer uses is a moved one it handles itself (lost, its old Job deleted: see movedHandle),
// which a server naming the namespace would turn into a reroute that leaves the old Job
// running. But a stage a Job backend issued is not an http server's: an http backend
// configured under the same name later (a kind change) must not be asked for a Job's handle,
// nor handed the Job image's analyze outputs; the stage is rerouted to it instead.
func (b *Backend) Server() string { return ServerKind }

// ServerKind is what a Job backend records as a stage's server (stages[].server).
const ServerKind = "job"

// Capabilities lists the capabilities this backend has a pod template for, sorted.
func (b *Backend) Capabilities() []videogenv1alpha1.Capability {
	return sortedCapabilities(b.cfg.Capabilities)
}

// Submit creates the stage's Job; the Job's name derives from w.Key, so submitting again
// returns the handle of the Job already there.
func (b *Backend) Submit(ctx context.Context, w generation.Work) (string, error) {
	cc, ok := b.cfg.Capabilities[w.Capability]
	if !ok {
		return "", generation.Permanent(fmt.Errorf("the job backend has no pod template for capability %s", w.Capability))
	}
	if err := checkWork(w); err != nil {
		return "", generation.Permanent(err)
	}
	if err := checkExecLimit(w, cc); err != nil {
		return "", generation.Permanent(err)
	}
	key := b.cfg.jobKey(w)
	h := handle(key)
	job := b.cfg.buildJob(w, cc, key)
	if err := checkJobSize(w, job); err != nil {
		return "", generation.Permanent(err)
	}
	err := b.client.Create(ctx, job)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		b.remember(h)
		return h, nil
	case apierrors.IsInvalid(err):
		// The pod template or an input is unacceptable to the apiserver; retrying cannot help.
		return "", generation.Permanent(fmt.Errorf("creating Job %s: %w", h, err))
	case apierrors.IsRequestEntityTooLargeError(err):
		// The same Job is refused again at every retry (a cluster whose request limit is
		// lower than maxJobBytes, or a proxy's): the stage fails, refunded.
		return "", generation.Permanent(fmt.Errorf("creating Job %s: the Job for the %s stage is too large for the Kubernetes API: %w", h, w.Stage, err))
	default:
		return "", fmt.Errorf("creating Job %s: %w", h, err)
	}
}

// Observe reads the stage's Job and, once it completed, the result its pod left.
func (b *Backend) Observe(ctx context.Context, w generation.Work, h string) (generation.Observation, error) {
	key, err := b.cfg.workHandle(w, h)
	if err != nil {
		if moved, ok := b.cfg.movedHandle(w, h); ok {
			// w's own Job, made while another namespace was configured: a config change moved
			// the Jobs. It is not read there (a handle must not make the manager read any
			// namespace it names), but the stage is not the caller's fault either: lost, it is
			// submitted again where Jobs run now, and its Job there is stopped.
			b.deleteMoved(ctx, w, moved)
			return generation.Observation{}, generation.Lost(fmt.Errorf("Job %s is in namespace %s, where this backend no longer runs Jobs (now %s)",
				h, moved.Namespace, b.cfg.jobKey(w).Namespace))
		}
		return generation.Observation{}, generation.Permanent(err)
	}
	var job batchv1.Job
	if err := b.client.Get(ctx, key, &job); err != nil {
		if !apierrors.IsNotFound(err) {
			return generation.Observation{}, fmt.Errorf("reading Job %s: %w", h, err)
		}
		if b.recentlySubmitted(h) {
			return generation.Observation{State: generation.Running, Message: "Job created, waiting for it to show up"}, nil
		}
		// Not generation.Lost: a Job outlives restarts of the manager and of its nodes, so one
		// that is gone was deleted, which stops its stage on purpose; submitting it again would
		// create the Job anew.
		return generation.Observation{}, generation.Permanent(fmt.Errorf("Job %s no longer exists: it was deleted before the %s stage finished", h, w.Stage))
	}
	pods, err := b.jobPods(ctx, &job)
	if err != nil {
		return generation.Observation{}, err
	}
	switch {
	case jobCondition(&job, batchv1.JobComplete):
		return b.completed(w, &job, pods), nil
	case jobCondition(&job, batchv1.JobFailed):
		return failed(&job, pods), nil
	case job.DeletionTimestamp != nil:
		return generation.Observation{}, generation.Permanent(fmt.Errorf("Job %s is being deleted before the %s stage finished", h, w.Stage))
	default:
		return running(pods), nil
	}
}

// Cancel deletes the stage's Job and, in the background, its pods. A Job already gone is fine.
func (b *Backend) Cancel(ctx context.Context, w generation.Work, h string) error {
	// A stage whose handle was never recorded may still have a Job; a handle that names a Job
	// this backend would not have made for w is not followed: w's own Job is deleted instead.
	key := b.cfg.jobKey(w)
	if h != "" {
		if own, err := b.cfg.workHandle(w, h); err == nil {
			key = own
		} else if moved, ok := b.cfg.movedHandle(w, h); ok {
			b.deleteMoved(ctx, w, moved)
		}
	}
	b.forget(handle(key))
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	err := b.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Job %s: %w", handle(key), err)
	}
	return nil
}

// maxJobBytes bounds a Job as Submit sends it (its JSON). Every input goes into the env of
// every container, so a Job's size is its inputs times its containers. etcd refuses an object
// over its request limit (1.5 MiB by default), and the kube-apiserver then answers a Job's
// create with a 422 about its selector (it retries without managedFields, and the Job's
// generated selector fails its own validation the second time), or over 3 MiB with a 413; and
// each pod the Job controller makes from the template is about as large, with its status
// besides. A Job over this is refused before it is sent, saying why.
const maxJobBytes = 1 << 20

// checkJobSize refuses a Job too large for the Kubernetes API to store (see maxJobBytes).
func checkJobSize(w generation.Work, job *batchv1.Job) error {
	data, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("encoding the Job for the %s stage: %w", w.Stage, err)
	}
	if len(data) <= maxJobBytes {
		return nil
	}
	containers := len(job.Spec.Template.Spec.InitContainers) + len(job.Spec.Template.Spec.Containers)
	return fmt.Errorf("the Job for the %s stage would be %d bytes, too large for the Kubernetes API (at most %d): its inputs, %d bytes of them the analyze outputs, go to each of its %d containers",
		w.Stage, len(data), maxJobBytes, jsonLen(w.Previous), containers)
}

func jsonLen(v any) int {
	data, _ := json.Marshal(v)
	return len(data)
}

// deleteMoved stops w's Job left at moved, a namespace this backend no longer runs Jobs in (see
// movedHandle): nothing else would (outside its task's namespace it has no owner), and it would
// hold its node to its activeDeadlineSeconds. The handle names the namespace, which others than
// the manager can write, so nothing named there is read or deleted by name: only the Jobs that
// carry w's own labels (this backend's, for w's task UID and stage) are deleted, by label. A
// failure (an older install's role without deletecollection, say) leaves the Job to its
// deadline, as before.
func (b *Backend) deleteMoved(ctx context.Context, w generation.Work, moved types.NamespacedName) {
	_ = deleteStageJobs(ctx, b.client, w, moved.Namespace)
}

// DeleteOrphaned stops w's Job that h, a handle a Job backend gave, names, for a caller that has
// no Job backend to do it: the one that made it is no longer configured under the stage's name
// (taken out of the config, or replaced by an http backend under it). As for a moved handle
// (deleteMoved), only the Jobs in the namespace h names that carry w's own labels are deleted,
// never the Job h names; c needs deletecollection on Jobs there.
func DeleteOrphaned(ctx context.Context, c client.Client, w generation.Work, h string) error {
	key, err := parseHandle(h)
	if err != nil {
		return err
	}
	return deleteStageJobs(ctx, c, w, key.Namespace)
}

// Follows says whether h, a handle a Job backend gave for w, names the very Job this backend
// makes for w (same namespace, same name from w's key): a Submit of w here meets that Job and
// follows it. A Job elsewhere (another Job backend's namespace) it never meets.
func (b *Backend) Follows(w generation.Work, h string) bool {
	_, err := b.cfg.workHandle(w, h)
	return err == nil
}

// deleteStageJobs deletes, in namespace, the Jobs this backend made for w's task and stage.
func deleteStageJobs(ctx context.Context, c client.Client, w generation.Work, namespace string) error {
	if w.TaskUID == "" || w.Stage == "" {
		return fmt.Errorf("work for task %s/%s lacks its UID or stage", w.Namespace, w.Task)
	}
	return c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(namespace), client.MatchingLabels{
		LabelManagedBy: managedBy, LabelComponent: component, LabelTaskUID: w.TaskUID, LabelStage: string(w.Stage),
	}, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// checkWork rejects work whose Job could not be named, labelled or owned.
func checkWork(w generation.Work) error {
	switch {
	case w.Key == "" || w.Namespace == "" || w.Task == "" || w.TaskUID == "":
		return fmt.Errorf("work for task %s/%s lacks its key, namespace, name or UID", w.Namespace, w.Task)
	case !slices.Contains(videogenv1alpha1.Stages, w.Stage):
		return fmt.Errorf("unknown stage %q", w.Stage)
	}
	return nil
}

func (b *Backend) remember(h string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	for k, at := range b.submitted {
		if now.Sub(at) > cacheGrace {
			delete(b.submitted, k)
		}
	}
	b.submitted[h] = now
}

func (b *Backend) recentlySubmitted(h string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.submitted[h]
	return ok && b.cfg.Clock.Now().Sub(at) <= cacheGrace
}

func (b *Backend) forget(h string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.submitted, h)
}
