// Package outbound sends the operator's outgoing webhooks: a task's completion callback and a
// PaymentEvent's delivery to a sink. One way to send (signed with Standard Webhooks, no
// redirects followed), one way to classify the answer (delivered, retry, gone, refused), the retry
// schedules both use, and one way to record an attempt in the object's status
// (v1alpha1.DeliveryAttempts). Inbound payment webhooks are the connectors' business.
package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// Outcome is what one attempt means for the delivery.
type Outcome int

const (
	// Retry: no answer, a timeout, or any status but 2xx and 410; try again later.
	Retry Outcome = iota
	// Delivered: the receiver answered 2xx.
	Delivered
	// Gone: the receiver answered 410 Gone, asking never to be sent this message again.
	Gone
	// Refused: the URL's host is a literal address the client's policy refuses (netguard), so
	// no attempt will ever be made; stop. A host name that resolves to such an address is a
	// Retry: its DNS may be fixed.
	Refused
)

// Attempt is the result of one POST.
type Attempt struct {
	Outcome Outcome
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Err says why the attempt did not deliver (nil when it did).
	Err error
}

// Message is one webhook to send.
type Message struct {
	URL string
	// ID is the webhook-id: the same on every attempt, so receivers can deduplicate.
	ID string
	// Secrets sign the message; the first is current, the others (a rotation's previous
	// secret) sign too, so a receiver that has not switched yet still verifies it.
	Secrets   []string
	Body      []byte
	UserAgent string
	// Timeout bounds the attempt (0: the client's own timeout only).
	Timeout time.Duration
}

// NewClient returns the HTTP client for outgoing webhooks. It never follows a redirect: a
// 301/302/303 would turn the POST into a bodiless GET that answers 2xx and would count as
// delivered; the 3xx is an answer like any non-2xx. dial, if not nil, guards where it may
// connect (netguard); timeout, if not 0, bounds every request.
func NewClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) *http.Client {
	transport := &http.Transport{
		DialContext:           dial,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NewGuardedClient is NewClient for caller-supplied URLs: it connects only where policy
// allows, checked when it dials (after DNS), and bounds every request by timeout.
func NewGuardedClient(policy netguard.Policy, timeout time.Duration) *http.Client {
	return NewClient(policy.DialContext(timeout), timeout)
}

// Send POSTs m once, signed for now, and classifies the answer. Errors read as the end of a
// sentence about the receiver ("answered 503 Service Unavailable", "no answer within 10s").
func Send(ctx context.Context, hc *http.Client, m Message, now time.Time) Attempt {
	if len(m.Secrets) == 0 {
		return Attempt{Outcome: Retry, Err: errors.New("no signing secret")}
	}
	if m.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return Attempt{Outcome: Retry, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", m.UserAgent)
	if err := standardwebhooks.SetHeaders(req.Header, m.Secrets[0], m.ID, now, m.Body, m.Secrets[1:]...); err != nil {
		return Attempt{Outcome: Retry, Err: err}
	}
	resp, err := hc.Do(req)
	if literal := (*netguard.LiteralAddressError)(nil); errors.As(err, &literal) {
		return Attempt{Outcome: Refused, Err: err}
	}
	if err != nil {
		if m.Timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", m.Timeout)
		}
		return Attempt{Outcome: Retry, Err: err}
	}
	// Drain a little so the connection can be reused; the answer's content is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	answered := answered(resp.StatusCode)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Attempt{Outcome: Delivered, Status: resp.StatusCode}
	case resp.StatusCode == http.StatusGone:
		return Attempt{Outcome: Gone, Status: resp.StatusCode, Err: errors.New(answered)}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// Said outright: a bare "answered 307" reads as a receiver fault that retrying may cure.
		return Attempt{Outcome: Retry, Status: resp.StatusCode,
			Err: errors.New(answered + " (redirects are not followed: point the webhook at the final URL)")}
	}
	return Attempt{Outcome: Retry, Status: resp.StatusCode, Err: errors.New(answered)}
}

// answered words a receiver's status by its code and standard reason ("answered 503 Service
// Unavailable"), never by the reason phrase it sent: those are the receiver's own bytes
// (terminal escapes, invalid UTF-8), and the error goes to a status and Events that kubectl
// prints as they are.
func answered(code int) string {
	if text := http.StatusText(code); text != "" {
		return "answered " + strconv.Itoa(code) + " " + text
	}
	return "answered " + strconv.Itoa(code)
}

// DefaultSteps is the completion callbacks' schedule, as Svix does: the first attempt is
// immediate, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
var DefaultSteps = Steps{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// ParseSteps reads a comma-separated list of durations ("5s,1m,1h").
func ParseSteps(s string) (Steps, error) {
	var out Steps
	for part := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("retry schedule entry %q must be a positive duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// Steps is a retry schedule of fixed waits: the wait after attempt n is Steps[n-1], ±10 % so
// that receivers recovering from an outage are not hit all at once.
type Steps []time.Duration

// Next is when the attempt after the given one is due; ok is false when the schedule is done.
func (s Steps) Next(attempts int32, now time.Time) (time.Time, bool) {
	if int(attempts) > len(s) || attempts < 1 {
		return time.Time{}, false
	}
	d := s[attempts-1]
	jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(d))
	return now.Add(d + jitter), true
}

// Exponential is the wait after the given failed attempt (1 for the first): the step
// min(maxWait, initial·2^(attempt-1)), scaled by a jitter in [0.5, 1] so that deliveries that
// failed together do not retry together. jitter is a random number in [0, 1).
func Exponential(initial, maxWait time.Duration, attempt int32, jitter float64) time.Duration {
	step := initial
	for i := int32(1); i < attempt && step < maxWait; i++ {
		if step > maxWait/2 { // doubling would pass maxWait, and past 2^62 ns overflow
			step = maxWait
			break
		}
		step *= 2
	}
	step = min(step, maxWait)
	return time.Duration(float64(step) * (0.5 + jitter/2))
}

// MaxErrorLength bounds the error text an attempt leaves in a status.
const MaxErrorLength = 512

// Record writes attempt a, made at now, into d: one more attempt, its time, status and error,
// and when it was delivered. The caller decides the state and the next attempt (NextAttemptAt
// is cleared here), since those depend on its schedule.
func Record(d *videogenv1alpha1.DeliveryAttempts, a Attempt, now time.Time) {
	at := metav1.NewTime(now)
	d.Attempts++
	d.LastAttemptAt, d.LastStatus, d.LastError, d.NextAttemptAt = &at, int32(a.Status), "", nil
	if a.Err != nil {
		d.LastError = Truncate(printable(a.Err.Error()), MaxErrorLength)
	}
	if a.Outcome == Delivered {
		d.DeliveredAt = &at
	}
}

// printable is error text fit for a status (and the events that quote it), which kubectl
// prints as it is: a receiver puts its own bytes in the error (the names of its TLS
// certificate, say), so invalid UTF-8 and every character that is not graphic (control
// characters, terminal escapes, bidirectional overrides) become U+FFFD; a line break or tab,
// a space.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsGraphic(r):
			return r
		case unicode.IsSpace(r):
			return ' '
		}
		return utf8.RuneError
	}, s)
}

// Truncate cuts s to at most n bytes, marking the cut with "..." and never leaving half a
// UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
