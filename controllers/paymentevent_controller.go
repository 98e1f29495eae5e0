package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// PaymentEventOptions configures the PaymentEvent controller.
type PaymentEventOptions struct {
	// SinksFile is the sink configuration file (--payment-event-sinks); it is re-read when it
	// changes. Ignored when Sinks is set; neither means no sinks.
	SinksFile string
	// Sinks yields the sink configuration directly (tests, embedding).
	Sinks paymentevents.SinkSource
	// HTTPClient sends deliveries (default paymentevents.NewHTTPClient()).
	HTTPClient *http.Client
	// MaxConcurrentReconciles bounds parallel reconciles (default: one more than
	// PaymentEventMaxSinks × MaxInFlightPerSink, so hanging sinks never hold every worker).
	MaxConcurrentReconciles int
	// MaxInFlightPerSink bounds the attempts in flight to one sink across all workers (default
	// 2): a sink that hangs holds at most that many workers, for its timeout, and the events
	// due for it meanwhile wait their turn (requeued after 1-2 s, no attempt counted).
	MaxInFlightPerSink int
}

// perSink is MaxInFlightPerSink or its default.
func (o *PaymentEventOptions) perSink() int {
	if o.MaxInFlightPerSink > 0 {
		return o.MaxInFlightPerSink
	}
	return 2
}

// workers is MaxConcurrentReconciles or its default.
func (o *PaymentEventOptions) workers() int {
	if o.MaxConcurrentReconciles > 0 {
		return o.MaxConcurrentReconciles
	}
	return videogenv1alpha1.PaymentEventMaxSinks*o.perSink() + 1
}

// PaymentEventReconciler records each verified payment event and forwards it to the configured
// sinks. It never moves points: top-ups stay offline and manual.
type PaymentEventReconciler struct {
	client.Client
	// APIReader reads around the cache before a delivery, so that a lagging cache never makes
	// an attempt that the status already shows.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Options   PaymentEventOptions
	// Jitter returns a random number in [0, 1) for the retry backoff (default math/rand).
	Jitter func() float64

	inFlightOnce sync.Once
	inFlight     *sinkSlots
	// unconfirmed holds, per event (types.NamespacedName), what to tell once a status write
	// that answered an error is known to have landed or not: func(ctx, stored).
	unconfirmed sync.Map
}

// +kubebuilder:rbac:groups=videogen.dev,resources=paymentevents,verbs=get;list;watch
// +kubebuilder:rbac:groups=videogen.dev,resources=paymentevents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile records a new event, then makes the deliveries that are due.
func (r *PaymentEventReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pe := &videogenv1alpha1.PaymentEvent{}
	if err := r.Get(ctx, req.NamespacedName, pe); err != nil {
		if apierrors.IsNotFound(err) {
			r.unconfirmed.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pe.DeletionTimestamp.IsZero() {
		r.unconfirmed.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if check, ok := r.unconfirmed.Load(req.NamespacedName); ok {
		// A write that answered an error, and whose read-back failed as well: settled now,
		// before anything else is attempted or written.
		stored := &videogenv1alpha1.PaymentEvent{}
		if err := r.APIReader.Get(ctx, req.NamespacedName, stored); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		} else if err == nil {
			check.(func(context.Context, *videogenv1alpha1.PaymentEvent))(ctx, stored)
		}
		r.unconfirmed.Delete(req.NamespacedName)
	}
	cfg := r.Options.Sinks.Current()
	var err error
	if !processed(pe) {
		err = r.record(ctx, pe, cfg)
	}
	if err == nil && disputeWarningOwed(pe) {
		err = r.warnDisputeOpened(ctx, pe)
	}
	var redeliverErr error
	if err == nil && redeliverRequested(pe) {
		// A redeliver request that cannot be recorded must not hold up the rows still pending:
		// forward them from the event as it was, and try the request again soon. A conflict
		// is the exception: the event changed, so everything starts again from a fresh read.
		before := pe.DeepCopy()
		if redeliverErr = r.redeliver(ctx, pe); apierrors.IsConflict(redeliverErr) {
			err = redeliverErr
		} else if redeliverErr != nil {
			logf.FromContext(ctx).Error(redeliverErr, "cannot record the redeliver request; pending deliveries go on")
			pe = before
		}
	}
	var res ctrl.Result
	if err == nil {
		res, err = r.forward(ctx, pe, cfg)
	}
	if err == nil && redeliverErr != nil && !apierrors.IsConflict(redeliverErr) &&
		(res.RequeueAfter == 0 || res.RequeueAfter > redeliverRetry) {
		res.RequeueAfter = redeliverRetry
	}
	// After a conflict an attempt whose result was lost is repeated with the same webhook-id.
	return requeueOnConflict(ctx, "payment event status", res, err)
}

// redeliverRetry is how soon a redeliver request whose status write failed is tried again.
const redeliverRetry = 10 * time.Second

// redeliverRequested says whether the event's redeliver annotation asks anew.
func redeliverRequested(pe *videogenv1alpha1.PaymentEvent) bool {
	v := pe.Annotations[videogenv1alpha1.AnnotationRedeliver]
	return v != "" && redeliverHandledValue(v) != pe.Status.RedeliverHandled
}

// redeliverHandledValue is what status.redeliverHandled records for a redeliver annotation
// value: the value itself when the field can hold it (up to 256 characters, so kubectl shows a
// timestamp as it was given), else "sha256:" and the hex SHA-256 of it. An annotation takes any
// length; copying a longer value would make every status write of the event invalid (422), and
// with it every delivery. The 71-character hash form is only ever a long value's: a value that
// is literally "sha256:…" is recorded as itself, and no 256-bit hash is guessed.
func redeliverHandledValue(v string) string {
	if utf8.RuneCountInString(v) <= videogenv1alpha1.PaymentEventMaxRedeliverHandledLength {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// redeliver carries out a redeliver request: the rows not delivered are pending again, due now,
// with a fresh count of attempts and the same webhook-id (a sink that got it after all can tell
// it is the same event). The request is marked handled in the same status write, so it is
// carried out once.
func (r *PaymentEventReconciler) redeliver(ctx context.Context, pe *videogenv1alpha1.PaymentEvent) error {
	now := metav1.NewTime(r.Clock.Now())
	var again []string
	for i := range pe.Status.Sinks {
		row := &pe.Status.Sinks[i]
		if row.State == videogenv1alpha1.DeliveryFailed {
			row.State, row.Attempts, row.NextAttemptAt = videogenv1alpha1.DeliveryPending, 0, &now
			again = append(again, row.Name)
		}
	}
	pe.Status.RedeliverHandled = redeliverHandledValue(pe.Annotations[videogenv1alpha1.AnnotationRedeliver])
	setForwarded(pe)
	if err := r.Status().Update(ctx, pe); err != nil {
		return err
	}
	if len(again) == 0 {
		r.Recorder.Eventf(pe, nil, corev1.EventTypeNormal, videogenv1alpha1.ReasonRedeliver, "Redeliver",
			"Redelivery asked; %s", nothingToRedeliver(pe))
		return nil
	}
	r.Recorder.Eventf(pe, nil, corev1.EventTypeNormal, videogenv1alpha1.ReasonRedeliver, "Redeliver",
		"Redelivering to sink(s) %s, with the same webhook-id", strings.Join(again, ", "))
	return nil
}

// nothingToRedeliver says why a redeliver request found no row given up.
func nothingToRedeliver(pe *videogenv1alpha1.PaymentEvent) string {
	pending := 0
	for _, row := range pe.Status.Sinks {
		if row.State == videogenv1alpha1.DeliveryPending {
			pending++
		}
	}
	switch {
	case len(pe.Status.Sinks) == 0:
		return "no configured sink accepts this event (NoSinks): it was sent nowhere and there is nothing to send again"
	case pending > 0:
		return fmt.Sprintf("no sink was given up; %d of %d still pending on their retry schedule", pending, len(pe.Status.Sinks))
	}
	return "every sink already has the event"
}

func processed(pe *videogenv1alpha1.PaymentEvent) bool {
	c := meta.FindStatusCondition(pe.Status.Conditions, videogenv1alpha1.ConditionProcessed)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == pe.Generation
}

// sinksTaking says how many sinks an event is for, in its Processed condition, which is written
// before any delivery: Forwarded tells how they went.
func sinksTaking(n int) string {
	if n == 0 {
		return "no configured sink takes it"
	}
	return fmt.Sprintf("%d sink(s) take it (Forwarded says how its delivery went)", n)
}

// record marks the event Processed and plans one delivery per sink that accepts it; events
// and metrics follow the status write (once it landed), so a retried reconcile does not repeat
// them.
func (r *PaymentEventReconciler) record(ctx context.Context, pe *videogenv1alpha1.PaymentEvent, cfg *paymentevents.SinkConfig) error {
	now := metav1.NewTime(r.Clock.Now())
	pe.Status.Sinks = nil
	if cfg != nil {
		for _, s := range cfg.Sinks {
			if s.Accepts(&pe.Spec) {
				pe.Status.Sinks = append(pe.Status.Sinks, videogenv1alpha1.SinkDelivery{
					Name: s.Name, WebhookID: paymentevents.WebhookID(pe.Name, s.Name),
					State: videogenv1alpha1.DeliveryPending, DeliveryAttempts: videogenv1alpha1.DeliveryAttempts{NextAttemptAt: &now},
				})
			}
		}
	}
	reason := videogenv1alpha1.ReasonEventRecorded
	if opensDispute(&pe.Spec) {
		reason = videogenv1alpha1.ReasonDisputeWarningOwed
	}
	meta.SetStatusCondition(&pe.Status.Conditions, metav1.Condition{
		Type: videogenv1alpha1.ConditionProcessed, Status: metav1.ConditionTrue, ObservedGeneration: pe.Generation,
		Reason: reason,
		Message: fmt.Sprintf("%s (%s) from %s recorded; %s; no points are credited from payment events",
			pe.Spec.EventType, pe.Spec.ConnectorEventType, pe.Spec.Connector, sinksTaking(len(pe.Status.Sinks))),
	})
	setForwarded(pe)
	pe.Status.ObservedGeneration = pe.Generation
	if err := r.Status().Update(ctx, pe); err != nil {
		// A write that failed otherwise than on a newer copy may have landed all the same (a
		// timeout): the next reconcile then finds the event processed and tells nothing, so
		// what landed is told now.
		if !apierrors.IsConflict(err) {
			r.confirm(ctx, pe, func(ctx context.Context, stored *videogenv1alpha1.PaymentEvent) {
				if processed(stored) {
					r.tellRecorded(ctx, stored)
				}
			})
		}
		return err
	}
	r.tellRecorded(ctx, pe)
	return nil
}

// confirm reads pe back after a status write that answered an error other than a conflict, and
// passes what is stored to tell; when the read fails too, tell waits for the event's next
// reconcile (which the error brings), so what landed is told once all the same.
func (r *PaymentEventReconciler) confirm(ctx context.Context, pe *videogenv1alpha1.PaymentEvent, tell func(ctx context.Context, stored *videogenv1alpha1.PaymentEvent)) {
	stored := &videogenv1alpha1.PaymentEvent{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pe), stored); {
	case err == nil:
		tell(ctx, stored)
	case !apierrors.IsNotFound(err):
		r.unconfirmed.Store(client.ObjectKeyFromObject(pe), tell)
	}
}

// tellRecorded counts a recorded event and emits its Normal event. The Warning of a dispute
// opened is not emitted here but by warnDisputeOpened, from what the status says is owed.
func (r *PaymentEventReconciler) tellRecorded(_ context.Context, pe *videogenv1alpha1.PaymentEvent) {
	paymentEventsProcessed.WithLabelValues(pe.Spec.Connector, pe.Spec.EventType).Inc()
	r.Recorder.Eventf(pe, nil, corev1.EventTypeNormal, videogenv1alpha1.ReasonPaymentReceived, "Record",
		"%s from %s: %s", pe.Spec.EventType, pe.Spec.Connector, describeAmount(&pe.Spec))
}

// opensDispute says whether a recorded event owes the Warning DisputeCreated.
func opensDispute(spec *videogenv1alpha1.PaymentEventSpec) bool {
	return spec.Dispute != nil && spec.EventType == string(connectors.DisputeCreated)
}

// disputeWarningOwed says whether pe was recorded and its Warning DisputeCreated not yet told.
func disputeWarningOwed(pe *videogenv1alpha1.PaymentEvent) bool {
	c := meta.FindStatusCondition(pe.Status.Conditions, videogenv1alpha1.ConditionProcessed)
	return processed(pe) && c.Reason == videogenv1alpha1.ReasonDisputeWarningOwed
}

// warnDisputeOpened emits the Warning a recorded dispute opening owes, then marks it told
// (reason Recorded; the condition keeps its time, which recordedBefore orders openings by). The
// write that recorded the event marked it owed, so a crash between that write and the Warning
// leaves it owed for the next reconcile, never lost; a crash or failed write after the Warning
// tells it again. A dispute is warned about once: a DISPUTE_CREATED whose dispute another
// DISPUTE_CREATED of its connector already opened (Adyen's NOTIFICATION_OF_CHARGEBACK then
// CHARGEBACK, Checkout's dispute_received then dispute_evidence_required: distinct deliveries,
// each stored) gets its Normal event only.
//
// The mark is read again from the API server first: the reconcile after the one that told the
// Warning is brought by the recording write's own watch event, and may read a cache that has
// that write but not yet the clearing one; told from the cache, the Warning would come twice.
func (r *PaymentEventReconciler) warnDisputeOpened(ctx context.Context, pe *videogenv1alpha1.PaymentEvent) error {
	fresh := &videogenv1alpha1.PaymentEvent{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pe), fresh); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !disputeWarningOwed(fresh) {
		return nil // told already; the cache has not caught up (pe's writes will meet a conflict)
	}
	fresh.DeepCopyInto(pe)
	if d := pe.Spec.Dispute; d != nil && !r.disputeOpenedBefore(ctx, pe) {
		r.Recorder.Eventf(pe, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonDisputeCreated, "Record",
			"Dispute %s opened on %s for %s, reason %q", orUnknown(d.DisputeID), disputedPayment(d),
			describeAmount(&pe.Spec), d.Reason)
	}
	c := *meta.FindStatusCondition(pe.Status.Conditions, videogenv1alpha1.ConditionProcessed)
	c.Reason = videogenv1alpha1.ReasonEventRecorded
	meta.SetStatusCondition(&pe.Status.Conditions, c)
	return r.Status().Update(ctx, pe)
}

// disputeOpenedBefore says whether another DISPUTE_CREATED of pe's connector and dispute id, at
// the same stage (inquiry or chargeback), was recorded before pe (Processed earlier, or in the
// same second under a smaller name): then that one warns, and pe need not. An inquiry does not
// count for the chargeback that follows it under the same id (Adyen's REQUEST_FOR_INFORMATION,
// then NOTIFICATION_OF_CHARGEBACK; Stripe's warning_ dispute, then its funds_withdrawn): that
// one is the news that money is taken back. Recorded before, not merely recorded: an opening
// whose telling waits for its next reconcile (a status write that landed but answered an
// error) must not be silenced by one recorded meanwhile, so the first one always warns.
// Openings recorded at once may each see the other unrecorded and both warn, never neither. A list that fails warns again rather than not at all; the cache may
// lag, which can only warn again.
func (r *PaymentEventReconciler) disputeOpenedBefore(ctx context.Context, pe *videogenv1alpha1.PaymentEvent) bool {
	id := pe.Spec.Dispute.DisputeID
	if id == "" {
		return false
	}
	var list videogenv1alpha1.PaymentEventList
	if err := r.List(ctx, &list, client.InNamespace(pe.Namespace),
		client.MatchingLabels(paymentevents.Labels(pe.Spec.Connector, pe.Spec.EventType))); err != nil {
		logf.FromContext(ctx).Error(err, "cannot list the dispute's earlier events; warning about it again", "dispute", id)
		return false
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name != pe.Name && other.Spec.Connector == pe.Spec.Connector &&
			other.Spec.EventType == pe.Spec.EventType && other.Spec.Dispute != nil &&
			other.Spec.Dispute.DisputeID == id && inquiry(&other.Spec) == inquiry(&pe.Spec) && recordedBefore(other, pe) {
			return true
		}
	}
	return false
}

// recordedBefore says whether other was recorded (Processed) before pe: by the condition's time
// (whole seconds), then by name, so that of any set of openings exactly one comes first.
func recordedBefore(other, pe *videogenv1alpha1.PaymentEvent) bool {
	if !processed(other) {
		return false
	}
	o := meta.FindStatusCondition(other.Status.Conditions, videogenv1alpha1.ConditionProcessed).LastTransitionTime
	p := meta.FindStatusCondition(pe.Status.Conditions, videogenv1alpha1.ConditionProcessed)
	if p == nil {
		return true
	}
	ot, pt := o.Rfc3339Copy(), p.LastTransitionTime.Rfc3339Copy()
	return ot.Before(&pt) || (ot.Equal(&pt) && other.Name < pe.Name)
}

// inquiry says whether a DISPUTE_CREATED opens an inquiry, which moves no funds and may be
// followed by a chargeback under the same dispute id: Adyen's REQUEST_FOR_INFORMATION, Square's
// dispute in an INQUIRY_ state (its chargeback comes on the same Dispute object, state
// EVIDENCE_REQUIRED), Stripe's in a warning_ status (its chargeback too: needs_response, with
// charge.dispute.funds_withdrawn).
func inquiry(spec *videogenv1alpha1.PaymentEventSpec) bool {
	switch spec.Connector {
	case "adyen":
		return spec.ConnectorEventType == "REQUEST_FOR_INFORMATION"
	case "square":
		return spec.Dispute != nil && strings.HasPrefix(spec.Dispute.Status, "INQUIRY_")
	case "stripe":
		return spec.Dispute != nil && strings.HasPrefix(spec.Dispute.Status, "warning_")
	}
	return false
}

func describeAmount(spec *videogenv1alpha1.PaymentEventSpec) string {
	if spec.AmountMinor == nil {
		return "no amount"
	}
	// Authorize.net payloads carry none (unless the ingress is given --authorizenet-currency).
	if spec.Currency == "" {
		return fmt.Sprintf("%d (minor units, no currency given)", *spec.AmountMinor)
	}
	return fmt.Sprintf("%d %s (minor units)", *spec.AmountMinor, spec.Currency)
}

// disputedPayment names what a dispute is about as closely as the processor told it: the payment,
// else the processor's transaction (a charge, an action; not the dispute's own id, which Adyen
// puts there), else the merchant's reference, and "payment (unknown)" only when none is known.
func disputedPayment(d *videogenv1alpha1.PaymentEventDetails) string {
	switch {
	case d.PaymentID != "":
		return "payment " + d.PaymentID
	case d.ConnectorTransactionID != "" && d.ConnectorTransactionID != d.DisputeID:
		return "transaction " + d.ConnectorTransactionID
	case d.MerchantReference != "":
		return fmt.Sprintf("the payment with merchant reference %q", d.MerchantReference)
	}
	return "payment (unknown)"
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// SetupWithManager registers the controller, loading the sink configuration file if one is set.
func (r *PaymentEventReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Jitter == nil {
		r.Jitter = rand.Float64
	}
	if r.Options.HTTPClient == nil {
		r.Options.HTTPClient = paymentevents.NewHTTPClient()
	}
	if r.Options.Sinks == nil {
		r.Options.Sinks = paymentevents.StaticSinks{}
		if r.Options.SinksFile != "" {
			file, err := paymentevents.NewFileSinks(r.Options.SinksFile, mgr.GetLogger().WithName("payment-event-sinks"))
			if err != nil {
				return err
			}
			r.Options.Sinks = file
		}
	}
	workers := r.Options.workers()
	return ctrl.NewControllerManagedBy(mgr).
		For(&videogenv1alpha1.PaymentEvent{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("paymentevent").
		Complete(r)
}

// BindFlags registers the controller's manager flags on fs.
func (o *PaymentEventOptions) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.SinksFile, "payment-event-sinks", o.SinksFile,
		"Sink configuration file (YAML or JSON) for forwarding PaymentEvents, re-read when it changes; empty: no sinks.")
}
