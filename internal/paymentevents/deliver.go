package paymentevents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// Outcome is what one delivery attempt means for the delivery.
type Outcome int

const (
	// Delivered: the sink answered 2xx.
	Delivered Outcome = iota
	// Retry: no answer, a timeout, or any status but 2xx and 410; try again later.
	Retry
	// Gone: the sink answered 410 Gone, asking never to be sent this again.
	Gone
)

// Attempt is the result of one POST.
type Attempt struct {
	Outcome Outcome
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Err says why the attempt did not deliver.
	Err error
}

// WebhookID is the webhook-id of an event's delivery to a sink: the same for every attempt
// (and for a re-created object of the same event), so receivers can de-duplicate.
func WebhookID(eventName, sinkName string) string {
	sum := sha256.Sum256([]byte(eventName + "/" + sinkName))
	return "msg_" + hex.EncodeToString(sum[:16])
}

// NewHTTPClient returns the client deliveries use: it never follows redirects, because a
// redirected POST would be resent as a GET and lose its body and signature.
func NewHTTPClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Deliver POSTs body to the sink once, signed with its secret for webhookID at now.
func Deliver(ctx context.Context, hc *http.Client, sink Sink, webhookID string, body []byte, now time.Time) Attempt {
	timeout := sink.Timeout.Duration
	if timeout <= 0 {
		timeout = DefaultSinkTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sink.URL, bytes.NewReader(body))
	if err != nil {
		return Attempt{Outcome: Retry, Err: fmt.Errorf("sink %q: %w", sink.Name, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "videogen-operator/payment-events")
	if err := standardwebhooks.SetHeaders(req.Header, sink.Secret, webhookID, now, body); err != nil {
		return Attempt{Outcome: Retry, Err: fmt.Errorf("sink %q: %w", sink.Name, err)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		return Attempt{Outcome: Retry, Err: fmt.Errorf("sink %q: %w", sink.Name, err)}
	}
	// Drain a little so the connection can be reused; the answer's content is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Attempt{Outcome: Delivered, Status: resp.StatusCode}
	case resp.StatusCode == http.StatusGone:
		return Attempt{Outcome: Gone, Status: resp.StatusCode,
			Err: fmt.Errorf("sink %q answered 410 Gone: it asks not to be sent this event again", sink.Name)}
	}
	return Attempt{Outcome: Retry, Status: resp.StatusCode,
		Err: fmt.Errorf("sink %q answered %s", sink.Name, resp.Status)}
}
