package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// WebhookConfig configures completion webhooks.
type WebhookConfig struct {
	// Schedule is the wait before each retry (outbound.DefaultSteps by default).
	Schedule outbound.Steps
	// Client posts the webhooks (outbound.NewGuardedClient: private destinations are refused
	// unless allowed, and every attempt is bounded).
	Client *http.Client
	// SecretNamespace holds the accounts' signing Secrets.
	SecretNamespace string
	// Concurrency bounds parallel deliveries (default DefaultWebhookConcurrency), a quarter of
	// them per receiver host and per account. A delivery mostly waits on its receiver, up to
	// the sender's timeout, so a few slow receivers must not hold up the others.
	Concurrency int
}

// DefaultWebhookConcurrency is the manager's --webhook-concurrency default.
const DefaultWebhookConcurrency = 16

// VideoTaskWebhookReconciler delivers the completion webhook of each finished task: at least
// once, with the same webhook-id on every attempt, retrying on the configured schedule. Its
// state lives in status.webhook, so a restarted manager resumes where the last one stopped.
type VideoTaskWebhookReconciler struct {
	client.Client
	APIReader client.Reader
	Secrets   *webhooksecrets.Store
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Config    WebhookConfig

	inFlight deliveryLimiter
}

// +kubebuilder:rbac:groups="",namespace=videogen-system,resources=secrets,verbs=get;create;update

// Reconcile makes the next delivery attempt when it is due.
func (r *VideoTaskWebhookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &videogenv1alpha1.VideoTask{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil || !webhookDue(cached) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	if next := cached.Status.Webhook; next != nil && next.NextAttemptAt != nil && now.Before(next.NextAttemptAt.Time) {
		return ctrl.Result{RequeueAfter: next.NextAttemptAt.Sub(now)}, nil
	}
	// The workers are shared by every account, and a receiver that never answers holds one for
	// the whole timeout: one account's many tasks to a hanging receiver would take them all and
	// every other webhook would wait behind their timeouts. So a receiver's host, and an
	// account, get a quarter of the workers at most; a delivery over that waits its turn,
	// requeued without taking a worker or counting as an attempt.
	keys := []string{"account/" + cached.Namespace, "host/" + webhookHost(cached.Spec.WebhookURL)}
	if !r.inFlight.acquire(max(1, r.concurrency()/4), keys...) {
		return ctrl.Result{RequeueAfter: wait.Jitter(time.Second, 1)}, nil
	}
	defer r.inFlight.release(keys...)
	// Decide on a fresh read: the cache may not show our last attempt yet, and sending again
	// for nothing is what this controller must avoid.
	task := &videogenv1alpha1.VideoTask{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, task); err != nil || !webhookDue(task) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A copy: the delivery as read stays in task.Status.Webhook, which the write's conflict
	// check compares the newer copy's with.
	d := task.Status.Webhook.DeepCopy()
	if d == nil {
		d = &videogenv1alpha1.WebhookDelivery{ID: WebhookID(task), State: videogenv1alpha1.WebhookPending}
	}
	if d.NextAttemptAt != nil && now.Before(d.NextAttemptAt.Time) {
		return ctrl.Result{RequeueAfter: d.NextAttemptAt.Sub(now)}, nil
	}

	secrets, err := r.Secrets.Ensure(ctx, task.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The body is the task as the API shows it, without the delivery's own bookkeeping, so
	// every attempt carries the same bytes.
	view := taskview.Of(task)
	view.Webhook = nil
	body, err := json.Marshal(view)
	if err != nil {
		return ctrl.Result{}, err
	}
	var res outbound.Attempt
	if bad := malformedWebhookURL(task.Spec.WebhookURL); bad != nil {
		res = outbound.Attempt{Outcome: outbound.Refused, Err: bad}
	} else {
		res = outbound.Send(ctx, r.Config.Client, outbound.Message{URL: task.Spec.WebhookURL, ID: d.ID,
			Secrets: secrets.Signing(now), Body: body, UserAgent: "videogen-webhooks/1"}, now)
		res.Err = receiverError(ctx, res.Err)
	}
	// The attempt is recorded, and the next one scheduled, from when it ended: an attempt that
	// waited out a 10 s timeout would otherwise eat the first 5 s step of the schedule.
	ended := r.Clock.Now()
	outbound.Record(&d.DeliveryAttempts, res, ended)
	eventType, reason, note := corev1.EventTypeNormal, "WebhookDelivered", "Delivered the completion webhook to "+task.Spec.WebhookURL
	switch res.Outcome {
	case outbound.Delivered:
		d.State = videogenv1alpha1.WebhookDelivered
	case outbound.Gone:
		d.State = videogenv1alpha1.WebhookStopped
		eventType, reason, note = corev1.EventTypeWarning, "WebhookStopped", "The webhook receiver answered 410 Gone; no more attempts"
	case outbound.Refused:
		// A literal private address never becomes public, so retrying for a day only keeps the
		// task open (a VideoTask made with kubectl skips the API's check of the URL). A host
		// name that resolves to one stays a Retry: its DNS may yet point elsewhere.
		d.State = videogenv1alpha1.WebhookStopped
		eventType, reason, note = corev1.EventTypeWarning, "WebhookRefused",
			"The webhook URL's host is not a public address; the service never calls one, so no more attempts"
		if literal := (*netguard.LiteralAddressError)(nil); errors.As(res.Err, &literal) {
			note = fmt.Sprintf("The webhook URL's host %s is not a public address; the service never calls one, so no more attempts", literal.Addr)
		}
		if malformed := (*malformedURLError)(nil); errors.As(res.Err, &malformed) {
			note = "The webhook URL " + malformed.msg + "; the service never calls such a URL, so no more attempts"
		}
	default:
		if next, ok := r.schedule().Next(d.Attempts, ended); ok {
			n := metav1.NewTime(next)
			d.NextAttemptAt = &n
			eventType, reason, note = corev1.EventTypeWarning, "WebhookRetrying",
				fmt.Sprintf("Attempt %d failed (%s); retrying at %s", d.Attempts, d.LastError, next.UTC().Format(time.RFC3339))
		} else {
			d.State = videogenv1alpha1.WebhookFailed
			eventType, reason, note = corev1.EventTypeWarning, "WebhookFailed",
				fmt.Sprintf("Gave up after %d attempts; last: %s", d.Attempts, d.LastError)
		}
	}
	// Record the attempt. A conflict with a write that did not touch the delivery (a finalizer,
	// an annotation) is retried on the newer copy, so that it does not cost a second delivery;
	// if this write is lost anyway, the attempt is made again with the same webhook-id.
	attempted := task.Status.Webhook.DeepCopy()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		task.Status.Webhook = d
		task.Status.Closed = closable(task)
		err := r.Status().Update(ctx, task)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &videogenv1alpha1.VideoTask{}
		if gerr := r.APIReader.Get(ctx, req.NamespacedName, fresh); gerr != nil {
			return gerr
		}
		if fresh.UID != task.UID || !equality.Semantic.DeepEqual(fresh.Status.Webhook, attempted) {
			return errWebhookRaced // another attempt was recorded meanwhile: keep its record
		}
		task = fresh
		return err
	})
	if errors.Is(err, errWebhookRaced) || apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if err != nil {
		// A write that failed otherwise may have landed all the same (a timeout): then no
		// later reconcile finds the attempt due, so what landed is told now.
		stored := &videogenv1alpha1.VideoTask{}
		if gerr := r.APIReader.Get(ctx, req.NamespacedName, stored); gerr != nil || stored.UID != task.UID || !recorded(stored.Status.Webhook, d) {
			return ctrl.Result{}, err
		}
		task = stored
	}
	// A first-attempt delivery gets no event (the status records it, and an event per task
	// would be one more apiserver write per task); a delivery after failed attempts does, to
	// close the story its Warnings began.
	if d.State != videogenv1alpha1.WebhookDelivered || d.Attempts > 1 {
		r.Recorder.Eventf(task, nil, eventType, reason, "Webhook", "%s", note)
	}
	webhookAttempts.WithLabelValues(attemptOutcome[reason]).Inc()
	if d.State == videogenv1alpha1.WebhookDelivered && task.Status.CompletedAt != nil {
		webhookLatency.Observe(ended.Sub(task.Status.CompletedAt.Time).Seconds())
	}
	if d.NextAttemptAt != nil {
		return ctrl.Result{RequeueAfter: d.NextAttemptAt.Sub(r.Clock.Now())}, nil
	}
	return ctrl.Result{}, nil
}

func (r *VideoTaskWebhookReconciler) concurrency() int {
	return cmp.Or(max(r.Config.Concurrency, 0), DefaultWebhookConcurrency)
}

// deliveryLimiter counts the deliveries in flight per key (a receiver's host, an account). It
// holds only the keys with a delivery in flight: two per worker at most.
type deliveryLimiter struct {
	mu    sync.Mutex
	count map[string]int
}

// acquire takes a slot under every key, or none if one of them has bound in flight already.
func (l *deliveryLimiter) acquire(bound int, keys ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.count[k] >= bound {
			return false
		}
	}
	if l.count == nil {
		l.count = map[string]int{}
	}
	for _, k := range keys {
		l.count[k]++
	}
	return true
}

func (l *deliveryLimiter) release(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.count[k]--; l.count[k] <= 0 {
			delete(l.count, k)
		}
	}
}

// webhookHost is the host and port a webhook URL is sent to, as the limiter counts it: the
// scheme's port when none is written, so that one receiver is one key however its URL is spelt.
func webhookHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port)
}

func (r *VideoTaskWebhookReconciler) schedule() outbound.Steps {
	if len(r.Config.Schedule) > 0 {
		return r.Config.Schedule
	}
	return outbound.DefaultSteps
}

// attemptOutcome names the attempt outcomes of videogen_task_webhook_attempts_total.
var attemptOutcome = map[string]string{"WebhookDelivered": "delivered", "WebhookRetrying": "retry", "WebhookStopped": "gone", "WebhookRefused": "refused", "WebhookFailed": "gave_up"}

// recorded says whether stored is the record d of this attempt, as the apiserver keeps it
// (its times to the second).
func recorded(stored, d *videogenv1alpha1.WebhookDelivery) bool {
	return stored != nil && stored.ID == d.ID && stored.State == d.State && stored.Attempts == d.Attempts &&
		stored.LastAttemptAt != nil && d.LastAttemptAt != nil && stored.LastAttemptAt.Unix() == d.LastAttemptAt.Unix()
}

// errWebhookRaced: another attempt's record reached the task first.
var errWebhookRaced = errors.New("another webhook attempt was recorded")

// WebhookID is the webhook-id of a task's completion webhook: one terminal state per task, so
// one id per task.
func WebhookID(t *videogenv1alpha1.VideoTask) string { return "msg_" + string(t.UID) }

// webhookDue: finished, settled, with a webhook URL, and not delivered or given up yet.
func webhookDue(t *videogenv1alpha1.VideoTask) bool {
	return t.Spec.WebhookURL != "" && t.Status.Phase.Terminal() && t.Status.Charge != videogenv1alpha1.ChargeFrozen &&
		t.DeletionTimestamp.IsZero() && (t.Status.Webhook == nil || t.Status.Webhook.State == videogenv1alpha1.WebhookPending)
}

// SetupWithManager registers the controller; it only wakes for tasks with a delivery to make.
func (r *VideoTaskWebhookReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	due := predicate.NewPredicateFuncs(func(o client.Object) bool {
		t, ok := o.(*videogenv1alpha1.VideoTask)
		return ok && webhookDue(t)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.VideoTask{}, builder.WithPredicates(due)).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.concurrency()}).
		Named("videotask-webhook").
		Complete(r)
}

// malformedURLError: a webhook URL the service never calls whatever its receiver does, which
// the REST API would have refused (netguard.CheckURL) but a VideoTask made with kubectl may
// carry: one that cannot be parsed, whose port is no port, or that carries credentials. Its
// message never quotes the URL, which may hold a password.
type malformedURLError struct{ msg string }

func (e *malformedURLError) Error() string { return "the webhook URL " + e.msg }

// malformedWebhookURL is the reason the service never calls raw, or nil. A destination the
// client's policy refuses is left to the client (its allow list decides).
func malformedWebhookURL(raw string) error {
	_, err := netguard.Policy{}.CheckURL(raw)
	if err == nil || errors.Is(err, netguard.ErrForbiddenDestination) {
		return nil
	}
	msg := err.Error() // "not a valid URL: …", "must not carry credentials", "has an invalid port …"
	if strings.HasPrefix(msg, "not ") {
		msg = "is " + msg
	}
	return &malformedURLError{msg: msg}
}

// receiverError words a failed attempt for last_error, which the task's caller reads: "receiver
// answered 503 ...", or what failed on the network without our resolver's or our own
// addresses (those go to the log).
func receiverError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if public := netguard.Explain(err); public != err {
		logf.FromContext(ctx).Info("completion webhook not delivered", "detail", err.Error())
		return fmt.Errorf("receiver: %w", public)
	}
	return fmt.Errorf("receiver %w", err)
}
