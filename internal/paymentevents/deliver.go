package paymentevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/outbound"
)

// WebhookID is the webhook-id of an event's delivery to a sink: the same for every attempt
// (and for a re-created object of the same event), so receivers can de-duplicate.
func WebhookID(eventName, sinkName string) string {
	sum := sha256.Sum256([]byte(eventName + "/" + sinkName))
	return "msg_" + hex.EncodeToString(sum[:16])
}

// NewHTTPClient returns the client deliveries use (outbound.NewClient: no redirect is
// followed); each sink's timeout bounds its attempts.
func NewHTTPClient() *http.Client { return outbound.NewClient(nil, 0) }

// Deliver POSTs body to the sink once (outbound.Send), signed with its secret and each of its
// previous secrets for webhookID at now; errors name the sink.
func Deliver(ctx context.Context, hc *http.Client, sink Sink, webhookID string, body []byte, now time.Time) outbound.Attempt {
	timeout := sink.Timeout.Duration
	if timeout <= 0 {
		timeout = DefaultSinkTimeout
	}
	a := outbound.Send(ctx, hc, outbound.Message{URL: sink.URL, ID: webhookID, Secrets: append([]string{sink.Secret}, sink.PreviousSecrets...),
		Body: body, UserAgent: "videogen-operator/payment-events", Timeout: timeout}, now)
	// net/http quotes the URL in a failure; its query or user info may be the sink's credential,
	// and the error goes into the status and a Warning event.
	if ue := (*url.Error)(nil); errors.As(a.Err, &ue) {
		ue.URL = withoutCredentials(ue.URL)
	}
	switch {
	case a.Err == nil:
	case a.Outcome == outbound.Gone:
		a.Err = fmt.Errorf("sink %q %w: it asks not to be sent this event again", sink.Name, a.Err)
	default:
		a.Err = fmt.Errorf("sink %q: %w", sink.Name, a.Err)
	}
	return a
}

// withoutCredentials is raw without query, fragment or user info.
func withoutCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the sink's URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
