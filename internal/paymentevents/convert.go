package paymentevents

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

// Field bounds, mirroring the CRD's maxLength markers (in characters).
const (
	maxIDLength        = videogenv1alpha1.PaymentEventMaxIDLength
	maxTextLength      = videogenv1alpha1.PaymentEventMaxTextLength
	maxCurrencyLength  = 8
	maxTypeLength      = 64
	maxConnectorLength = 128
)

// FromDelivery builds the PaymentEvents a verified delivery is stored as: one per event, so
// each item of a batch (Adyen sends several) is an object of its own, named from its own id.
// Each then gets its type's Kubernetes events and metrics, and an item redelivered inside a
// new batch is a duplicate without hiding the items that are new.
func FromDelivery(ev *connectors.Event, namespace string, body []byte, receivedAt time.Time) []*videogenv1alpha1.PaymentEvent {
	if len(ev.Items) == 0 {
		return []*videogenv1alpha1.PaymentEvent{FromEvent(ev, namespace, body, receivedAt)}
	}
	pes := make([]*videogenv1alpha1.PaymentEvent, len(ev.Items))
	for i := range ev.Items {
		pes[i] = FromEvent(&ev.Items[i], namespace, body, receivedAt)
	}
	return pes
}

// FromEvent builds the PaymentEvent for a verified event received at receivedAt with the given
// raw body. Only the body's SHA-256 and size are kept; processor strings are cut to the CRD's
// bounds so that an unusually long field can never make a verified event unstorable.
func FromEvent(ev *connectors.Event, namespace string, body []byte, receivedAt time.Time) *videogenv1alpha1.PaymentEvent {
	sum := sha256.Sum256(body)
	spec := videogenv1alpha1.PaymentEventSpec{
		Connector:          ev.Connector,
		MerchantEventID:    cut(ev.MerchantEventID, maxIDLength),
		EventType:          cut(string(ev.Type), maxTypeLength),
		ConnectorEventType: cut(ev.ConnectorEventType, maxConnectorLength),
		Complete:           ev.Complete,
		Payment:            payment(ev.Payment),
		Refund:             refund(ev.Refund),
		Dispute:            dispute(ev.Dispute),
		OccurredAt:         timeOrNil(ev.OccurredAt),
		ReceivedAt:         metav1.NewTime(receivedAt.UTC().Truncate(time.Second)),
		BodySHA256:         hex.EncodeToString(sum[:]),
		BodySize:           int64(len(body)),
	}
	if d := firstDetails(&spec); d != nil {
		spec.AmountMinor = ptr.To(d.AmountMinor)
		spec.Currency = d.Currency
	}
	for i := range ev.Items {
		if i == videogenv1alpha1.PaymentEventMaxItems {
			spec.ItemsOmitted = int32(len(ev.Items) - i)
			break
		}
		item := &ev.Items[i]
		spec.Items = append(spec.Items, videogenv1alpha1.PaymentEventItem{
			MerchantEventID:    cut(item.MerchantEventID, maxIDLength),
			EventType:          cut(string(item.Type), maxTypeLength),
			ConnectorEventType: cut(item.ConnectorEventType, maxConnectorLength),
			Payment:            payment(item.Payment),
			Refund:             refund(item.Refund),
			Dispute:            dispute(item.Dispute),
		})
	}
	return &videogenv1alpha1.PaymentEvent{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      Name(ev.Connector, ev.MerchantEventID),
			Labels:    Labels(spec.Connector, spec.EventType),
		},
		Spec: spec,
	}
}

func firstDetails(spec *videogenv1alpha1.PaymentEventSpec) *videogenv1alpha1.PaymentEventDetails {
	switch {
	case spec.Payment != nil:
		return spec.Payment
	case spec.Refund != nil:
		return spec.Refund
	case spec.Dispute != nil:
		return spec.Dispute
	}
	return nil
}

func payment(p *connectors.PaymentDetails) *videogenv1alpha1.PaymentEventDetails {
	if p == nil {
		return nil
	}
	return details(videogenv1alpha1.PaymentEventDetails{
		PaymentID: p.PaymentID, ConnectorTransactionID: p.ConnectorTransactionID, MerchantReference: p.MerchantReference,
		AmountMinor: p.AmountMinor, Currency: p.Currency, Status: p.Status, Reason: p.Reason,
	}, p.CreatedAt)
}

func refund(r *connectors.RefundDetails) *videogenv1alpha1.PaymentEventDetails {
	if r == nil {
		return nil
	}
	return details(videogenv1alpha1.PaymentEventDetails{
		RefundID: r.RefundID, PaymentID: r.PaymentID, ConnectorTransactionID: r.ConnectorTransactionID,
		MerchantReference: r.MerchantReference, AmountMinor: r.AmountMinor, Currency: r.Currency,
		Status: r.Status, Reason: r.Reason,
	}, r.CreatedAt)
}

func dispute(d *connectors.DisputeDetails) *videogenv1alpha1.PaymentEventDetails {
	if d == nil {
		return nil
	}
	return details(videogenv1alpha1.PaymentEventDetails{
		DisputeID: d.DisputeID, PaymentID: d.PaymentID, ConnectorTransactionID: d.ConnectorTransactionID,
		MerchantReference: d.MerchantReference, AmountMinor: d.AmountMinor, Currency: d.Currency,
		Status: d.Status, Reason: d.Reason,
	}, d.CreatedAt)
}

// details bounds every string of d and sets its creation time.
func details(d videogenv1alpha1.PaymentEventDetails, createdAt time.Time) *videogenv1alpha1.PaymentEventDetails {
	for _, f := range []*string{&d.PaymentID, &d.RefundID, &d.DisputeID, &d.ConnectorTransactionID, &d.MerchantReference} {
		*f = cut(*f, maxIDLength)
	}
	d.Currency = cut(d.Currency, maxCurrencyLength)
	d.Status = cut(d.Status, maxTextLength)
	d.Reason = cut(d.Reason, maxTextLength)
	d.CreatedAt = timeOrNil(createdAt)
	return &d
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return ptr.To(metav1.NewTime(t.UTC()))
}

// cut shortens s to at most n characters (the unit of OpenAPI's maxLength), never splitting one.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}
