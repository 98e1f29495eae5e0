// Package paymentevents turns verified connector events into PaymentEvent objects and
// PaymentEvent objects into the JSON that sinks receive. The ingress and the controller share
// it, so both agree on names, bounds and the wire form.
package paymentevents

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// nameHashLength is how many hex characters of the id's SHA-256 go into a name: 160 bits, far
// beyond any chance of two event ids colliding.
const nameHashLength = 40

// Name is the PaymentEvent name for a connector's event: "<connector>-" and the first 40 hex
// characters of sha256(merchantEventID). It is a DNS-1123 subdomain of at most 73 characters
// for any id, and the same for every redelivery, so a repeated delivery finds the object.
func Name(connector, merchantEventID string) string {
	sum := sha256.Sum256([]byte(merchantEventID))
	return connector + "-" + hex.EncodeToString(sum[:])[:nameHashLength]
}

// Labels are the selection labels of a PaymentEvent: its connector and event type. A value
// that is not a valid label value is left out rather than failing the store.
func Labels(connector, eventType string) map[string]string {
	labels := map[string]string{}
	for key, value := range map[string]string{
		videogenv1alpha1.LabelPaymentConnector: connector,
		videogenv1alpha1.LabelPaymentEventType: eventType,
	} {
		if len(validation.IsValidLabelValue(value)) == 0 {
			labels[key] = value
		}
	}
	return labels
}
