package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

var loopback = netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func TestSendSignsWithEverySecret(t *testing.T) {
	current, previous := standardwebhooks.NewSecret(), standardwebhooks.NewSecret()
	var verifiedCurrent, verifiedPrevious error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c, _ := reference.NewWebhook(current)
		p, _ := reference.NewWebhook(previous)
		verifiedCurrent, verifiedPrevious = c.Verify(body, r.Header), p.Verify(body, r.Header)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	res := Send(context.Background(), NewGuardedClient(loopback, time.Second), Message{URL: srv.URL, ID: "msg_1", Secrets: []string{current, previous}, Body: []byte(`{"id":"vt-1"}`)}, time.Now())
	if res.Outcome != Delivered || res.Err != nil {
		t.Fatalf("Send = %+v", res)
	}
	if verifiedCurrent != nil || verifiedPrevious != nil {
		t.Fatalf("verification with current: %v, with previous: %v", verifiedCurrent, verifiedPrevious)
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	var gets int
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gets++ }))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect} {
		redirect := httptest.NewServer(http.RedirectHandler(target.URL, code))
		res := Send(context.Background(), NewGuardedClient(loopback, time.Second), Message{URL: redirect.URL, ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
		redirect.Close()
		if res.Outcome != Retry || res.Status != code {
			t.Errorf("redirect %d: %+v, want an undelivered %d", code, res, code)
		}
		if res.Err == nil || !strings.Contains(res.Err.Error(), "redirects are not followed: point the webhook at the final URL") {
			t.Errorf("redirect %d: error %v does not say that redirects are not followed", code, res.Err)
		}
	}
	if gets != 0 {
		t.Fatalf("the redirect target was called %d times", gets)
	}
}

func TestSendRefusesPrivateDestinationsAtDialTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("reached") }))
	defer srv.Close()
	res := Send(context.Background(), NewGuardedClient(netguard.Policy{}, time.Second), Message{URL: srv.URL, ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
	if !errors.Is(res.Err, netguard.ErrForbiddenDestination) || res.Outcome != Refused {
		t.Fatalf("Send to loopback = %+v, want Refused with ErrForbiddenDestination", res)
	}
	// A name that resolves to loopback may resolve elsewhere later: tried again.
	byName := "http://localhost:" + srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	res = Send(context.Background(), NewGuardedClient(netguard.Policy{}, time.Second), Message{URL: byName, ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
	if !errors.Is(res.Err, netguard.ErrForbiddenDestination) || res.Outcome != Retry {
		t.Fatalf("Send to localhost = %+v, want Retry with ErrForbiddenDestination", res)
	}
}

func TestRetrySchedules(t *testing.T) {
	schedule := Steps{time.Second, time.Minute}
	now := time.Unix(1_000_000, 0)
	for attempt, base := range map[int32]time.Duration{1: time.Second, 2: time.Minute} {
		next, ok := schedule.Next(attempt, now)
		if d := next.Sub(now); !ok || d < base*9/10 || d > base*11/10 {
			t.Errorf("after attempt %d: wait %s, want %s ±10%%", attempt, d, base)
		}
	}
	if _, ok := schedule.Next(3, now); ok {
		t.Error("a retry after the schedule is exhausted")
	}
	if _, err := ParseSteps("5s,bad"); err == nil {
		t.Error("a bad schedule was accepted")
	}
	// Exponential: 5 s doubling to a cap of 20 s, the jitter scaling each wait into [½, 1].
	for attempt, want := range map[int32]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 9: 20 * time.Second} {
		if got := Exponential(5*time.Second, 20*time.Second, attempt, 0.999999); got < want*99/100 || got > want {
			t.Errorf("attempt %d, most jitter: %s, want %s", attempt, got, want)
		}
		if got := Exponential(5*time.Second, 20*time.Second, attempt, 0); got != want/2 {
			t.Errorf("attempt %d, no jitter: %s, want %s", attempt, got, want/2)
		}
	}
}

// Record keeps the one attempt shape of both kinds of delivery.
func TestRecordAnAttempt(t *testing.T) {
	var d videogenv1alpha1.DeliveryAttempts
	t0 := time.Unix(1_000_000, 0)
	next := metav1.NewTime(t0.Add(time.Minute))
	d.NextAttemptAt = &next
	Record(&d, Attempt{Outcome: Retry, Status: 503, Err: errors.New("answered 503 Service Unavailable")}, t0)
	if d.Attempts != 1 || d.LastStatus != 503 || d.LastError != "answered 503 Service Unavailable" || !d.LastAttemptAt.Time.Equal(t0) ||
		d.NextAttemptAt != nil || d.DeliveredAt != nil {
		t.Fatalf("after a failed attempt: %+v", d)
	}
	Record(&d, Attempt{Outcome: Retry, Err: errors.New(strings.Repeat("é", 400))}, t0)
	if len(d.LastError) > MaxErrorLength || !utf8.ValidString(d.LastError) || !strings.HasSuffix(d.LastError, "...") {
		t.Fatalf("a long error is not cut cleanly: %d bytes", len(d.LastError))
	}
	t1 := t0.Add(time.Hour)
	Record(&d, Attempt{Outcome: Delivered, Status: 204}, t1)
	if d.Attempts != 3 || d.LastStatus != 204 || d.LastError != "" || !d.DeliveredAt.Time.Equal(t1) {
		t.Fatalf("after delivery: %+v", d)
	}
}

// Gone and timeouts are classified like any answer: 410 is Gone, no answer is a Retry.
func TestClassifiesGoneAndTimeouts(t *testing.T) {
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer gone.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	hc := NewGuardedClient(loopback, 5*time.Second)
	if a := Send(context.Background(), hc, Message{URL: gone.URL, ID: "m", Secrets: []string{standardwebhooks.NewSecret()}}, time.Now()); a.Outcome != Gone || a.Status != 410 {
		t.Errorf("410: %+v", a)
	}
	a := Send(context.Background(), hc, Message{URL: slow.URL, ID: "m", Secrets: []string{standardwebhooks.NewSecret()}, Timeout: 100 * time.Millisecond}, time.Now())
	if a.Outcome != Retry || a.Status != 0 || a.Err == nil || !strings.Contains(a.Err.Error(), "no answer within 100ms") {
		t.Errorf("timeout: %+v", a)
	}
	if a := Send(context.Background(), hc, Message{URL: gone.URL, ID: "m"}, time.Now()); a.Outcome != Retry || a.Err == nil {
		t.Errorf("no secret: %+v", a)
	}
}
