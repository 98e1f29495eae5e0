package paymentevents

import (
	"encoding/json"
	"strings"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Payload is the JSON body POSTed to every sink, in the envelope Standard Webhooks recommends:
// {"type", "timestamp", "data"}. data is the PaymentEvent's spec plus its id (the object name)
// and namespace.
type Payload struct {
	// Type is "payment_event." and the normalized type in lower case, e.g.
	// "payment_event.dispute_created".
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      PayloadData `json:"data"`
}

// PayloadData is the event as sinks see it.
type PayloadData struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	videogenv1alpha1.PaymentEventSpec
}

// Body is the Payload of pe, encoded. It depends only on the (immutable) spec and name, so every
// attempt of a delivery carries the same bytes.
func Body(pe *videogenv1alpha1.PaymentEvent) ([]byte, error) {
	return json.Marshal(Payload{
		Type:      "payment_event." + strings.ToLower(pe.Spec.EventType),
		Timestamp: pe.Spec.ReceivedAt.UTC(),
		Data:      PayloadData{ID: pe.Name, Namespace: pe.Namespace, PaymentEventSpec: pe.Spec},
	})
}
