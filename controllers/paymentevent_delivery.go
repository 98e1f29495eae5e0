package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// forward makes every delivery that is due, records the results in status, and requeues for
// the next one. Deliveries are at least once: an attempt whose result could not be written is
// repeated with the same webhook-id.
func (r *PaymentEventReconciler) forward(ctx context.Context, cached *videogenv1alpha1.PaymentEvent, cfg *paymentevents.SinkConfig) (ctrl.Result, error) {
	now := r.Clock.Now()
	cachedRows := due(cached, now)
	if len(cachedRows) == 0 {
		return requeueAt(cached, now), nil
	}
	slots := r.slots()
	if !slices.ContainsFunc(cachedRows, func(row *videogenv1alpha1.SinkDelivery) bool { return slots.free(row.Name) }) {
		return r.requeueBusy(cached, now), nil // no read around the cache while every sink is busy
	}
	pe := &videogenv1alpha1.PaymentEvent{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), pe); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rows := due(pe, now)
	if len(rows) == 0 {
		return requeueAt(pe, now), nil
	}
	body, err := paymentevents.Body(pe)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("encoding payment event %s for its sinks: %w", pe.Name, err)
	}
	retry := paymentevents.RetryPolicy{}
	if cfg != nil {
		retry = cfg.Retry
	}
	retry = retry.WithDefaults()

	// Each row's outcome is counted, like its Kubernetes event, once the status records it: an
	// attempt whose result is lost is made again and may end otherwise (a gave_up that is
	// then delivered must not fire the given-up alert). A row whose sink already has
	// MaxInFlightPerSink attempts in flight (from other events) is left as it is, for a
	// later reconcile: a sink that hangs must not hold every worker.
	var attempted []*videogenv1alpha1.SinkDelivery
	var busy bool
	outcomes := make([]string, len(rows))
	var wg sync.WaitGroup
	for _, row := range rows {
		i := len(attempted)
		sink, ok := cfg.Find(row.Name)
		switch {
		case !ok:
			outcomes[i] = r.finish(row, now, "sink was removed from the configuration")
		case !slots.acquire(sink.Name):
			busy = true
			continue
		default:
			wg.Go(func() {
				defer slots.release(sink.Name)
				attempt := paymentevents.Deliver(ctx, r.Options.HTTPClient, sink, row.WebhookID, body, now)
				// Recorded and rescheduled from when the attempt ended: a sink that waited out its
				// timeout must still get the whole backoff before the next attempt.
				outcomes[i] = r.apply(row, attempt, retry, r.Clock.Now())
			})
		}
		attempted = append(attempted, row)
	}
	wg.Wait()
	outcomes = outcomes[:len(attempted)]
	if len(attempted) == 0 {
		return r.requeueBusy(pe, now), nil
	}
	setForwarded(pe)
	if err := r.Status().Update(ctx, pe); err != nil {
		// A write that failed otherwise than on a newer copy may have landed all the same (a
		// timeout): then no later reconcile makes these attempts again, so they are told now.
		if !apierrors.IsConflict(err) {
			r.confirm(ctx, pe, func(_ context.Context, stored *videogenv1alpha1.PaymentEvent) {
				if landed(stored, attempted) {
					r.tell(pe, attempted, outcomes)
				}
			})
		}
		return ctrl.Result{}, err
	}
	r.tell(pe, attempted, outcomes)
	if busy {
		return r.requeueBusy(pe, r.Clock.Now()), nil
	}
	return requeueAt(pe, r.Clock.Now()), nil
}

// sinkBusyRetry is how soon (scaled by 1 to 2, so that the events waiting for one sink do not
// all wake together) an event is looked at again when a sink it is due for was busy.
const sinkBusyRetry = time.Second

// requeueBusy is requeueAt for an event with a due row left for a busy sink: that row is due
// already, so the wake-up is put off by sinkBusyRetry instead of being immediate.
func (r *PaymentEventReconciler) requeueBusy(pe *videogenv1alpha1.PaymentEvent, now time.Time) ctrl.Result {
	res := requeueAt(pe, now)
	if wait := sinkBusyRetry + time.Duration(r.Jitter()*float64(sinkBusyRetry)); res.RequeueAfter < wait {
		res.RequeueAfter = wait
	}
	return res
}

// slots returns the reconciler's count of attempts in flight per sink.
func (r *PaymentEventReconciler) slots() *sinkSlots {
	r.inFlightOnce.Do(func() { r.inFlight = &sinkSlots{limit: r.Options.perSink(), busy: map[string]int{}} })
	return r.inFlight
}

// sinkSlots counts the attempts in flight to each sink, up to limit per sink.
type sinkSlots struct {
	mu    sync.Mutex
	limit int
	busy  map[string]int
}

// free says whether an attempt to the sink may start now (a removed sink, never attempted, is).
func (s *sinkSlots) free(sink string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[sink] < s.limit
}

// acquire takes one of the sink's slots, if one is free.
func (s *sinkSlots) acquire(sink string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[sink] >= s.limit {
		return false
	}
	s.busy[sink]++
	return true
}

// release gives back a slot taken by acquire.
func (s *sinkSlots) release(sink string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[sink]--; s.busy[sink] <= 0 {
		delete(s.busy, sink)
	}
}

// tell counts each attempted row's outcome and emits the event of a row that reached its end.
func (r *PaymentEventReconciler) tell(pe *videogenv1alpha1.PaymentEvent, rows []*videogenv1alpha1.SinkDelivery, outcomes []string) {
	for i, row := range rows {
		paymentEventDeliveries.WithLabelValues(row.Name, outcomes[i]).Inc()
		r.report(pe, row)
	}
}

// landed says whether the stored event holds the rows as this reconcile wrote them.
func landed(stored *videogenv1alpha1.PaymentEvent, rows []*videogenv1alpha1.SinkDelivery) bool {
	for _, row := range rows {
		i := slices.IndexFunc(stored.Status.Sinks, func(s videogenv1alpha1.SinkDelivery) bool { return s.Name == row.Name })
		if i < 0 {
			return false
		}
		got := stored.Status.Sinks[i]
		if got.State != row.State || got.Attempts != row.Attempts || got.LastAttemptAt == nil ||
			!got.LastAttemptAt.Equal(ptr.To(row.LastAttemptAt.Rfc3339Copy())) {
			return false
		}
	}
	return true
}

// due returns the pending rows whose next attempt time has come.
func due(pe *videogenv1alpha1.PaymentEvent, now time.Time) []*videogenv1alpha1.SinkDelivery {
	var rows []*videogenv1alpha1.SinkDelivery
	for i := range pe.Status.Sinks {
		row := &pe.Status.Sinks[i]
		if row.State == videogenv1alpha1.DeliveryPending && (row.NextAttemptAt == nil || !row.NextAttemptAt.After(now)) {
			rows = append(rows, row)
		}
	}
	return rows
}

// requeueAt wakes the reconciler for the earliest pending attempt, if any.
func requeueAt(pe *videogenv1alpha1.PaymentEvent, now time.Time) ctrl.Result {
	var next time.Time
	for _, row := range pe.Status.Sinks {
		if row.State != videogenv1alpha1.DeliveryPending || row.NextAttemptAt == nil {
			continue
		}
		if next.IsZero() || row.NextAttemptAt.Before(&metav1.Time{Time: next}) {
			next = row.NextAttemptAt.Time
		}
	}
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Millisecond)}
}

// apply records one attempt, which ended at ended, in its row, and returns its outcome label
// for videogen_payment_event_deliveries_total.
func (r *PaymentEventReconciler) apply(row *videogenv1alpha1.SinkDelivery, a outbound.Attempt, retry paymentevents.RetryPolicy, ended time.Time) string {
	outbound.Record(&row.DeliveryAttempts, a, ended)
	switch {
	case a.Outcome == outbound.Delivered:
		row.State = videogenv1alpha1.DeliveryDelivered
		return "delivered"
	case a.Outcome == outbound.Gone:
		row.State = videogenv1alpha1.DeliveryFailed
		return "gone"
	case row.Attempts >= retry.MaxAttempts:
		row.State = videogenv1alpha1.DeliveryFailed
		row.LastError = outbound.Truncate(fmt.Sprintf("gave up after %d attempts: %s", row.Attempts, row.LastError), videogenv1alpha1.PaymentEventMaxTextLength)
		return "gave_up"
	default:
		next := metav1.NewTime(ended.Add(retry.Delay(row.Attempts, r.Jitter())))
		row.NextAttemptAt = &next
		return "retry"
	}
}

// finish ends a row that cannot be attempted at all, and returns its outcome label.
func (r *PaymentEventReconciler) finish(row *videogenv1alpha1.SinkDelivery, now time.Time, why string) string {
	at := metav1.NewTime(now)
	row.State, row.NextAttemptAt, row.LastAttemptAt = videogenv1alpha1.DeliveryFailed, nil, &at
	row.LastStatus, row.LastError = 0, why
	return "sink_removed"
}

// report emits the Kubernetes event of a row that reached its end in this reconcile.
func (r *PaymentEventReconciler) report(pe *videogenv1alpha1.PaymentEvent, row *videogenv1alpha1.SinkDelivery) {
	switch row.State {
	case videogenv1alpha1.DeliveryDelivered:
		r.Recorder.Eventf(pe, nil, corev1.EventTypeNormal, videogenv1alpha1.ReasonSinksDelivered, "Forward",
			"Delivered to sink %s after %d attempt(s)", row.Name, row.Attempts)
	case videogenv1alpha1.DeliveryFailed:
		r.Recorder.Eventf(pe, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonSinkFailed, "Forward",
			"Not delivered to sink %s: %s", row.Name, row.LastError)
	}
}

// setForwarded sums the rows up: True when every sink has the event, False when one gave up or
// none takes it, Unknown while deliveries are pending.
func setForwarded(pe *videogenv1alpha1.PaymentEvent) {
	cond := metav1.Condition{Type: videogenv1alpha1.ConditionForwarded, ObservedGeneration: pe.Generation}
	var pending, failed int
	var firstFailure string
	for _, row := range pe.Status.Sinks {
		switch row.State {
		case videogenv1alpha1.DeliveryPending:
			pending++
		case videogenv1alpha1.DeliveryFailed:
			if failed == 0 {
				firstFailure = fmt.Sprintf("sink %s: %s", row.Name, row.LastError)
			}
			failed++
		}
	}
	total := len(pe.Status.Sinks)
	switch {
	case total == 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, videogenv1alpha1.ReasonNoSinks, "no configured sink accepts this event"
	case failed > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonSinkFailed
		cond.Message = outbound.Truncate(fmt.Sprintf("%d of %d sink(s) not delivered; %s", failed, total, firstFailure), 1024)
	case pending > 0:
		cond.Status, cond.Reason = metav1.ConditionUnknown, videogenv1alpha1.ReasonSinksPending
		cond.Message = fmt.Sprintf("%d of %d sink(s) pending", pending, total)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, videogenv1alpha1.ReasonSinksDelivered
		cond.Message = fmt.Sprintf("delivered to %d sink(s)", total)
	}
	meta.SetStatusCondition(&pe.Status.Conditions, cond)
}
