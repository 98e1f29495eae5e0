// Package webhookingress serves POST /v1/webhooks/{connector}: it verifies a payment webhook
// with the Event Service, stores each event it carries once as a PaymentEvent (every item of an
// Adyen batch on its own), and acknowledges it. Everything else (metrics, Kubernetes events,
// forwarding to sinks) is the PaymentEvent controller's job, so the processor gets its 2xx as
// soon as the events are safely stored.
package webhookingress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/paymentevents"
)

// Pattern is the route the handler serves on an http.ServeMux.
const Pattern = "POST /v1/webhooks/{connector}"

// Defaults.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultStoreTimeout = 10 * time.Second
)

// storeParallelism bounds the creates in flight for one delivery: a large Adyen batch is still
// acknowledged quickly, without one delivery flooding the apiserver.
const storeParallelism = 8

// Options configures a Handler.
type Options struct {
	// Service verifies and normalizes deliveries. Required.
	Service *eventservice.Service
	// Client creates PaymentEvents (and reads one back for a duplicate). Required.
	Client client.Client
	// Namespace holds the PaymentEvents. Required.
	Namespace string
	// Connectors is the registry the Service was built with (eventservice.WithRegistry); it
	// answers unknown connectors before the body is read and bounds metric labels. Nil means
	// the default registry (connectors/all), which is what eventservice.New uses by default.
	Connectors *connectors.Registry
	// MaxBodyBytes caps the body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64
	// StoreTimeout bounds the create (and the get of a duplicate); default 10s.
	StoreTimeout time.Duration
	// Metrics records outcomes; nil records nothing (see NewMetrics).
	Metrics *Metrics
	// Clock stamps ReceivedAt (default the real clock).
	Clock clock.PassiveClock
	// Logger reports store failures and conflicts, with the request_id of the answer (default
	// slog.Default(); a server passes its own, so these lines share its format).
	Logger *slog.Logger
}

// Handler is the webhook ingress. It is safe for concurrent use.
type Handler struct{ opts Options }

// Ack is the body of every 2xx answer. A redelivery gets the same ids with Duplicate true.
// For a batch (Adyen with several items) the first four fields describe the first item, as the
// Event Service does, and Items lists every one.
type Ack struct {
	// ID is the PaymentEvent's name.
	ID              string `json:"id"`
	MerchantEventID string `json:"merchant_event_id"`
	EventType       string `json:"event_type"`
	// Duplicate is true when nothing new was stored: every event was already there.
	Duplicate bool `json:"duplicate"`
	// Stored and Duplicates count the delivery's events newly stored and already there.
	Stored     int `json:"stored"`
	Duplicates int `json:"duplicates"`
	// Items is set for a batch only, one entry per item in order.
	Items []ItemAck `json:"items,omitempty"`
}

// ItemAck is the answer for one stored event.
type ItemAck struct {
	ID              string `json:"id"`
	MerchantEventID string `json:"merchant_event_id"`
	EventType       string `json:"event_type"`
	Duplicate       bool   `json:"duplicate"`
}

// New checks opts and fills defaults.
func New(opts Options) (*Handler, error) {
	switch {
	case opts.Service == nil:
		return nil, errors.New("webhookingress: Options.Service is required")
	case opts.Client == nil:
		return nil, errors.New("webhookingress: Options.Client is required")
	case opts.Namespace == "":
		return nil, errors.New("webhookingress: Options.Namespace is required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{opts: opts}, nil
}

// Register mounts the handler on mux at Pattern, and answers other methods on the same path
// with 405 in the apiserver's error shape.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle(Pattern, h)
	mux.Handle("/v1/webhooks/{connector}", httpjson.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		httpjson.WriteError(w, r, http.StatusMethodNotAllowed, httpjson.CodeMethodNotAllowed, "webhooks are delivered with POST")
	})))
}

// ServeHTTP handles one delivery. It gives the request an id when no middleware did.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httpjson.WithRequestID(http.HandlerFunc(h.serve)).ServeHTTP(w, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := strings.ToLower(strings.TrimSpace(r.PathValue("connector")))
	if !h.known(name) {
		h.reject(w, r, start, "unknown", outcomeNotFound, http.StatusNotFound, httpjson.CodeNotFound,
			"no webhook connector named "+httpjson.Echo(name))
		return
	}
	h.opts.Metrics.received(name)

	// Signatures cover the bytes as sent, and no processor compresses them: a body under a
	// content coding would be verified (and parsed) as the wrong bytes, and answered as a bad
	// signature. Refused as the REST API refuses one (RFC 9110), before it is read.
	if coding := contentCoding(r.Header.Values("Content-Encoding")); coding != "" {
		w.Header().Set("Accept-Encoding", "identity")
		h.reject(w, r, start, name, outcomeUnsupportedMedia, http.StatusUnsupportedMediaType, httpjson.CodeUnsupportedMedia,
			fmt.Sprintf("Content-Encoding %s is not supported: send the %s webhook body uncompressed", httpjson.Echo(coding), name))
		return
	}

	body, err := h.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.reject(w, r, start, name, outcomePayloadTooLarge, http.StatusRequestEntityTooLarge, httpjson.CodePayloadTooLarge,
				fmt.Sprintf("%s webhook body exceeds %d bytes", name, h.opts.MaxBodyBytes))
			return
		}
		// The server's read deadline passed: the body came too slowly.
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			h.reject(w, r, start, name, outcomeInvalidRequest, http.StatusRequestTimeout, httpjson.CodeRequestTimeout,
				fmt.Sprintf("the %s webhook body was not received in time", name))
			return
		}
		h.reject(w, r, start, name, outcomeInvalidRequest, http.StatusBadRequest, httpjson.CodeInvalidRequest,
			fmt.Sprintf("reading the %s webhook body: %v", name, err))
		return
	}

	ev, err := h.opts.Service.HandleWebhook(r.Context(), name, &connectors.Request{
		Method: r.Method, URI: absoluteURI(r), Headers: r.Header, Body: body, Query: r.URL.Query(),
	}, "")
	if err != nil {
		h.rejectVerification(w, r, start, name, err)
		return
	}
	h.opts.Metrics.verified(name)
	h.storeAndAcknowledge(w, r, start, name, ev, body)
}

// storeAndAcknowledge stores every event of a verified delivery and answers 200 once all of
// them are stored (or were already), 503 if any is not.
func (h *Handler) storeAndAcknowledge(w http.ResponseWriter, r *http.Request, start time.Time, name string, ev *connectors.Event, body []byte) {
	pes := paymentevents.FromDelivery(ev, h.opts.Namespace, body, h.opts.Clock.Now())
	acks, errs := h.storeAll(r.Context(), pes)
	conflicting := conflictingIDs(pes, errs)
	if unstored, firstErr := unstoredIDs(pes, errs); len(unstored) > 0 {
		h.opts.Logger.ErrorContext(r.Context(), "webhookingress: cannot store payment event",
			"connector", name, "merchant_event_id", unstored[0], "unstored", len(unstored), "events", len(pes),
			"request_id", httpjson.RequestID(r.Context()), "error", firstErr)
		h.reject(w, r, start, name, outcomeStoreFailed, http.StatusServiceUnavailable, httpjson.CodeUnavailable,
			storeFailedMessage(name, unstored, len(pes)))
		return
	}
	if len(conflicting) > 0 {
		h.reject(w, r, start, name, outcomeConflict, http.StatusConflict, httpjson.CodeConflict,
			conflictMessage(name, conflicting, len(pes)))
		return
	}
	ack := summarize(acks)
	outcome := outcomeStored
	if ack.Duplicate {
		outcome = outcomeDuplicate
	}
	h.opts.Metrics.done(name, outcome, start)
	httpjson.WriteJSON(w, http.StatusOK, ack)
}

// storeAll stores every object, at most storeParallelism at a time; errs[i] is pes[i]'s error.
// After a failure no new create is started: the processor retries the whole delivery anyway,
// and the objects stored by then are duplicates on that retry.
func (h *Handler) storeAll(ctx context.Context, pes []*videogenv1alpha1.PaymentEvent) ([]ItemAck, []error) {
	acks := make([]ItemAck, len(pes))
	errs := make([]error, len(pes))
	// Every item of a batch carries the hash of the whole body, so two items with one name are
	// not one event for having it: compare what they say, as store compares a delivery with the
	// event stored under its name. The first of the name is stored; another that differs is
	// the conflict it would be in a delivery of its own.
	first := make(map[string]*videogenv1alpha1.PaymentEvent, len(pes))
	for i, pe := range pes {
		if f, ok := first[pe.Name]; !ok {
			first[pe.Name] = pe
		} else if !sameContent(&f.Spec, &pe.Spec) {
			h.opts.Logger.WarnContext(ctx, "webhookingress: two different events of one delivery have the same id",
				"name", pe.Name, "merchant_event_id", pe.Spec.MerchantEventID,
				"first_event_type", f.Spec.EventType, "event_type", pe.Spec.EventType,
				"request_id", httpjson.RequestID(ctx))
			errs[i] = errConflict
		}
	}
	slots := make(chan struct{}, storeParallelism)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i, pe := range pes {
		if errs[i] != nil {
			continue
		}
		slots <- struct{}{}
		if failed.Load() {
			<-slots
			errs[i] = errNotAttempted
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			// A conflict is permanent and says nothing about the store: the batch's other
			// items are still stored, so that only the conflicting ones are missing.
			if acks[i], errs[i] = h.store(ctx, pe); errs[i] != nil && !errors.Is(errs[i], errConflict) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	return acks, errs
}

// errNotAttempted marks the objects storeAll skipped after a failure.
var errNotAttempted = errors.New("not attempted after an earlier event failed")

// errConflict marks an event whose id names a stored PaymentEvent with other content.
var errConflict = errors.New("another event with this id is already stored")

// unstoredIDs lists the merchant event ids of the objects that were not stored for a reason a
// retry may cure (not a conflict), and the first real error (not errNotAttempted) for the log.
func unstoredIDs(pes []*videogenv1alpha1.PaymentEvent, errs []error) (ids []string, first error) {
	for i, err := range errs {
		if err == nil || errors.Is(err, errConflict) {
			continue
		}
		ids = append(ids, pes[i].Spec.MerchantEventID)
		if first == nil && !errors.Is(err, errNotAttempted) {
			first = err
		}
	}
	return ids, first
}

func storeFailedMessage(connector string, unstored []string, total int) string {
	if total == 1 {
		return fmt.Sprintf("the %s event %s was verified but could not be stored; retry later", connector, unstored[0])
	}
	return fmt.Sprintf("%d of the %d %s events in this batch were verified but could not be stored (first: %s); retry the whole batch later",
		len(unstored), total, connector, unstored[0])
}

// conflictingIDs lists the merchant event ids of the objects not stored because another event
// with the same id is.
func conflictingIDs(pes []*videogenv1alpha1.PaymentEvent, errs []error) (ids []string) {
	for i, err := range errs {
		if errors.Is(err, errConflict) {
			ids = append(ids, pes[i].Spec.MerchantEventID)
		}
	}
	return ids
}

func conflictMessage(connector string, conflicting []string, total int) string {
	if total == 1 {
		return fmt.Sprintf("the %s event %s was verified but not stored: a different event with the same id is already stored", connector, conflicting[0])
	}
	return fmt.Sprintf("%d of the %d %s events in this batch were verified but not stored: a different event with the same id is already stored (first: %s); the others are stored",
		len(conflicting), total, connector, conflicting[0])
}

// summarize builds the answer from every event's ack (all stored or already there).
func summarize(acks []ItemAck) Ack {
	first := acks[0]
	ack := Ack{ID: first.ID, MerchantEventID: first.MerchantEventID, EventType: first.EventType}
	for _, a := range acks {
		if a.Duplicate {
			ack.Duplicates++
		} else {
			ack.Stored++
		}
	}
	ack.Duplicate = ack.Stored == 0
	if len(acks) > 1 {
		ack.Items = acks
	}
	return ack
}

// store creates the PaymentEvent; an existing one with the same content (a redelivery, or a
// concurrent delivery of the same event) is acknowledged as a duplicate and left unchanged.
//
// An existing one whose content differs (sameEvent) is errConflict, answered 409: the id the
// connector derived names two different events (an id scheme that leaves out part of what makes
// an event, as Adyen's psp:eventCode did with success). Answering "duplicate" would tell the
// processor a verified event was stored when it was thrown away; overwriting the stored one
// would change what sinks were already sent; storing it under another name would give sinks
// two different events with one merchant_event_id. A non-2xx is what processors act on: they
// retry and show the failed delivery, the conflict outcome of videogen_webhook_requests_total
// and the log say which event, and nothing is stored or acknowledged that is not true.
func (h *Handler) store(ctx context.Context, pe *videogenv1alpha1.PaymentEvent) (ItemAck, error) {
	// A processor hanging up must not abort a create half-way: finish it, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.opts.StoreTimeout)
	defer cancel()
	ack := ItemAck{ID: pe.Name, MerchantEventID: pe.Spec.MerchantEventID, EventType: pe.Spec.EventType}
	err := h.opts.Client.Create(ctx, pe)
	if err == nil {
		return ack, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return ItemAck{}, err
	}
	ack.Duplicate = true
	stored := &videogenv1alpha1.PaymentEvent{}
	if err := h.opts.Client.Get(ctx, client.ObjectKeyFromObject(pe), stored); err != nil {
		// Something is stored under this name, but not necessarily this event: only the
		// comparison below tells a redelivery from a different event with the same id (409).
		// Acknowledging unread would tell the processor a verified event was stored when it
		// may have been thrown away; a 503 costs one retry, which gets the real answer.
		h.opts.Logger.WarnContext(ctx, "webhookingress: duplicate payment event could not be read back",
			"name", pe.Name, "request_id", httpjson.RequestID(ctx), "error", err)
		return ItemAck{}, fmt.Errorf("payment event %s exists but could not be read back to compare: %w", pe.Name, err)
	}
	if !stored.DeletionTimestamp.IsZero() {
		// Held by a finalizer, it will be gone: acknowledging it would leave the event stored
		// nowhere. A retry once it is gone stores it again.
		return ItemAck{}, fmt.Errorf("payment event %s is being deleted; retry once it is gone", pe.Name)
	}
	if !sameEvent(&stored.Spec, &pe.Spec) {
		h.opts.Logger.WarnContext(ctx, "webhookingress: a different event with the same id is already stored",
			"name", pe.Name, "merchant_event_id", pe.Spec.MerchantEventID,
			"stored_event_type", stored.Spec.EventType, "event_type", pe.Spec.EventType,
			"stored_body_sha256", stored.Spec.BodySHA256, "body_sha256", pe.Spec.BodySHA256,
			"request_id", httpjson.RequestID(ctx))
		return ItemAck{}, errConflict
	}
	ack.MerchantEventID, ack.EventType = stored.Spec.MerchantEventID, stored.Spec.EventType
	return ack, nil
}

// sameEvent reports whether a delivered event is the stored one again. The same body is. A
// different body still is when what the event says is the same: the body is the whole
// delivery, so an Adyen item redelivered inside another batch has another body, and processors
// may resend with unsigned text or times changed (Adyen's eventDate, reason). So the type, the
// amount and every id and status of the details are compared, not the free text (reason), the
// times (occurredAt, createdAt, receivedAt) or the delivery (body hash and size, batch items).
func sameEvent(stored, delivered *videogenv1alpha1.PaymentEventSpec) bool {
	return stored.BodySHA256 == delivered.BodySHA256 || sameContent(stored, delivered)
}

// sameContent is sameEvent without the body: whether two events say the same thing.
func sameContent(stored, delivered *videogenv1alpha1.PaymentEventSpec) bool {
	return stored.Connector == delivered.Connector &&
		stored.MerchantEventID == delivered.MerchantEventID &&
		stored.EventType == delivered.EventType &&
		stored.ConnectorEventType == delivered.ConnectorEventType &&
		stored.Complete == delivered.Complete &&
		ptr.Equal(stored.AmountMinor, delivered.AmountMinor) &&
		stored.Currency == delivered.Currency &&
		sameDetails(stored.Payment, delivered.Payment) &&
		sameDetails(stored.Refund, delivered.Refund) &&
		sameDetails(stored.Dispute, delivered.Dispute)
}

// sameDetails compares two details but for their reason and creation time.
func sameDetails(a, b *videogenv1alpha1.PaymentEventDetails) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Reason, y.Reason = "", ""
	x.CreatedAt, y.CreatedAt = nil, nil
	return x == y
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > h.opts.MaxBodyBytes {
		return nil, &http.MaxBytesError{Limit: h.opts.MaxBodyBytes}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
}

// contentCoding returns the Content-Encoding header's values when any names a coding other
// than identity, else "".
func contentCoding(values []string) string {
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return strings.Join(values, ", ")
			}
		}
	}
	return ""
}

func (h *Handler) known(name string) bool {
	var err error
	if h.opts.Connectors != nil {
		_, err = h.opts.Connectors.Lookup(name)
	} else {
		_, err = connectors.Lookup(name)
	}
	return err == nil
}

// rejectVerification answers an error of Service.HandleWebhook.
func (h *Handler) rejectVerification(w http.ResponseWriter, r *http.Request, start time.Time, name string, err error) {
	msg := err.Error()
	switch eventservice.ErrorCode(err) {
	case connect.CodeUnauthenticated:
		h.reject(w, r, start, name, outcomeInvalidSignature, http.StatusUnauthorized, httpjson.CodeInvalidSignature, msg)
	case connect.CodeInvalidArgument:
		h.reject(w, r, start, name, outcomeInvalidRequest, http.StatusBadRequest, httpjson.CodeInvalidRequest, msg)
	case connect.CodeNotFound:
		h.reject(w, r, start, "unknown", outcomeNotFound, http.StatusNotFound, httpjson.CodeNotFound, msg)
	case connect.CodeUnavailable, connect.CodeCanceled, connect.CodeDeadlineExceeded:
		h.reject(w, r, start, name, outcomeUnavailable, http.StatusServiceUnavailable, httpjson.CodeUnavailable, msg)
	default:
		h.reject(w, r, start, name, outcomeInternal, http.StatusInternalServerError, httpjson.CodeInternal,
			fmt.Sprintf("the %s webhook could not be handled", name))
	}
}

func (h *Handler) reject(w http.ResponseWriter, r *http.Request, start time.Time, connector, outcome string, status int, code, msg string) {
	h.opts.Metrics.done(connector, outcome, start)
	httpjson.WriteError(w, r, status, code, msg)
}

// absoluteURI rebuilds the URL the processor called, as Square signs it. Behind a proxy the
// scheme or host may differ from what the processor used: configure Square's notification URL
// explicitly there (see README).
func absoluteURI(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if proto := r.Header.Get("X-Forwarded-Proto"); proto == "https" || proto == "http" {
		scheme = proto
	}
	return scheme + "://" + r.Host + r.URL.RequestURI()
}

// Service is the Event Service the ingress verifies with, so the Handle RPC can be served from
// the same configuration.
func (h *Handler) Service() *eventservice.Service { return h.opts.Service }
