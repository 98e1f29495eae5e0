// Package taskwebhooks sends completion webhooks: the task object POSTed to the caller's
// webhook_url, signed with the Standard Webhooks scheme, through an HTTP client that refuses
// private destinations at dial time (after DNS resolution) and does not follow redirects.
package taskwebhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// DefaultSchedule is the wait before each retry after a failed attempt, as Svix does: the
// first attempt is immediate, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// ParseSchedule parses "5s,5m,30m,2h".
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("retry schedule entry %q must be a positive duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// NextRetry returns when to try again after the n-th failed attempt (1-based), jittered by
// ±10% so that receivers recovering from an outage are not hit all at once; ok is false when
// the schedule is exhausted.
func NextRetry(schedule []time.Duration, attempts int32, now time.Time) (time.Time, bool) {
	if int(attempts) > len(schedule) || attempts < 1 {
		return time.Time{}, false
	}
	d := schedule[attempts-1]
	jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(d))
	return now.Add(d + jitter), true
}

// Sender posts signed webhooks.
type Sender struct {
	client *http.Client
}

// NewSender returns a Sender whose requests time out after timeout and may reach only
// destinations policy allows.
func NewSender(policy netguard.Policy, timeout time.Duration) *Sender {
	transport := &http.Transport{
		DialContext:           policy.DialContext(timeout),
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &Sender{client: &http.Client{
		Transport: transport,
		Timeout:   timeout,
		// Redirects are not followed: a 301/302/303 would turn the POST into a bodiless GET
		// that answers 2xx, and the task would count as delivered. The 3xx is an answer like
		// any non-2xx: retried, and visible in the task's webhook status.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Result is the outcome of one attempt.
type Result struct {
	// Status is the HTTP status (0 when there was no answer).
	Status int
	// Err says why there was no answer, or is nil.
	Err error
}

// Delivered reports a 2xx answer.
func (r Result) Delivered() bool { return r.Status >= 200 && r.Status < 300 }

// Gone reports 410: the receiver asks never to be called again for this message.
func (r Result) Gone() bool { return r.Status == http.StatusGone }

// Send POSTs body to url with the webhook headers, signed with every secret given.
func (s *Sender) Send(ctx context.Context, url, id string, secrets []string, body []byte, now time.Time) Result {
	if len(secrets) == 0 {
		return Result{Err: errors.New("no signing secret")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "videogen-webhooks/1")
	if err := standardwebhooks.SetHeaders(req.Header, secrets[0], id, now, body, secrets[1:]...); err != nil {
		return Result{Err: err}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Result{Err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	r := Result{Status: resp.StatusCode}
	if !r.Delivered() {
		r.Err = errors.New("receiver answered " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode))
	}
	return r
}
