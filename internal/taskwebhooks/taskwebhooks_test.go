package taskwebhooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"

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
	res := NewSender(loopback, time.Second).Send(context.Background(), srv.URL, "msg_1", []string{current, previous}, []byte(`{"id":"vt-1"}`), time.Now())
	if !res.Delivered() || res.Err != nil {
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
		res := NewSender(loopback, time.Second).Send(context.Background(), redirect.URL, "msg_1", []string{standardwebhooks.NewSecret()}, []byte("{}"), time.Now())
		redirect.Close()
		if res.Delivered() || res.Status != code {
			t.Errorf("redirect %d: %+v, want an undelivered %d", code, res, code)
		}
	}
	if gets != 0 {
		t.Fatalf("the redirect target was called %d times", gets)
	}
}

func TestSendRefusesPrivateDestinationsAtDialTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("reached") }))
	defer srv.Close()
	res := NewSender(netguard.Policy{}, time.Second).Send(context.Background(), srv.URL, "msg_1", []string{standardwebhooks.NewSecret()}, []byte("{}"), time.Now())
	if !errors.Is(res.Err, netguard.ErrForbiddenDestination) {
		t.Fatalf("Send to loopback = %+v, want ErrForbiddenDestination", res)
	}
}

func TestGoneAndRetrySchedule(t *testing.T) {
	if !(Result{Status: 410}).Gone() || (Result{Status: 500}).Gone() {
		t.Fatal("Gone() is wrong")
	}
	schedule := []time.Duration{time.Second, time.Minute}
	now := time.Unix(1_000_000, 0)
	for attempt, base := range map[int32]time.Duration{1: time.Second, 2: time.Minute} {
		next, ok := NextRetry(schedule, attempt, now)
		if d := next.Sub(now); !ok || d < base*9/10 || d > base*11/10 {
			t.Errorf("after attempt %d: wait %s, want %s ±10%%", attempt, d, base)
		}
	}
	if _, ok := NextRetry(schedule, 3, now); ok {
		t.Error("a retry after the schedule is exhausted")
	}
	if _, err := ParseSchedule("5s,bad"); err == nil {
		t.Error("a bad schedule was accepted")
	}
}
