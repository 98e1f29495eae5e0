package chaos

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	reference "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// hookReceiver is the callers' completion webhook endpoint: /hooks/{account}. It verifies
// every delivery with the account's secret (the Standard Webhooks reference library), turns
// away one attempt in ten with a 503 so that retries happen, and records what it accepted.
type hookReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	verifier map[string]*reference.Webhook // by account
	byTask   map[string]*received          // by account/task id
	problems []string

	accepted, refused atomic.Int64
}

type received struct {
	accepted   int
	webhookIDs map[string]bool
	statuses   map[string]bool
}

func startHookReceiver() *hookReceiver {
	h := &hookReceiver{verifier: map[string]*reference.Webhook{}, byTask: map[string]*received{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/{account}", h.serve)
	h.srv = httptest.NewServer(mux)
	return h
}

func (h *hookReceiver) url(account string) string { return h.srv.URL + "/hooks/" + account }

func (h *hookReceiver) trust(account, secret string) error {
	wh, err := reference.NewWebhook(secret)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.verifier[account] = wh
	h.mu.Unlock()
	return nil
}

func (h *hookReceiver) problem(format string, args ...any) {
	h.mu.Lock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("account")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	wh := h.verifier[account]
	h.mu.Unlock()
	if wh == nil {
		h.problem("delivery for unknown account %q", account)
		http.Error(w, "unknown account", http.StatusNotFound)
		return
	}
	if err := wh.Verify(body, r.Header); err != nil {
		h.problem("account %s: delivery %s failed verification: %v", account, r.Header.Get("webhook-id"), err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var task struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &task); err != nil || task.ID == "" {
		h.problem("account %s: delivery %s carries no task: %s", account, r.Header.Get("webhook-id"), body)
		http.Error(w, "no task", http.StatusBadRequest)
		return
	}
	if rand.IntN(10) == 0 {
		h.refused.Add(1)
		http.Error(w, "try again (fault injection)", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	rec := h.byTask[account+"/"+task.ID]
	if rec == nil {
		rec = &received{webhookIDs: map[string]bool{}, statuses: map[string]bool{}}
		h.byTask[account+"/"+task.ID] = rec
	}
	rec.accepted++
	rec.webhookIDs[r.Header.Get("webhook-id")] = true
	rec.statuses[task.Status] = true
	h.mu.Unlock()
	h.accepted.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) get(account, id string) (received, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, ok := h.byTask[account+"/"+id]
	if !ok {
		return received{}, false
	}
	return *rec, true
}

// stripeSender delivers signed Stripe events to POST /v1/webhooks/stripe, as Stripe does:
// every attempt signed afresh, retried until a 2xx.
type stripeSender struct {
	apiURL string
	secret string
	client *http.Client

	mu   sync.Mutex
	acks map[string][]bool // merchant event id → the duplicate flag of every 2xx answer

	deliveries, retries atomic.Int64
}

func stripePayload(eventID string) []byte {
	return []byte(`{"id":"` + eventID + `","object":"event","type":"payment_intent.succeeded","created":1763700000,` +
		`"data":{"object":{"id":"pi_` + eventID + `","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`)
}

// deliver posts one copy of an event until it is acknowledged or the deadline passes.
func (s *stripeSender) deliver(ctx context.Context, eventID string, deadline time.Time) error {
	payload := stripePayload(eventID)
	for attempt := 0; ; attempt++ {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write([]byte(ts + "." + string(payload)))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.apiURL+"/v1/webhooks/stripe", bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := s.client.Do(req)
		status := 0
		var ack struct {
			Duplicate bool `json:"duplicate"`
		}
		if err == nil {
			status = resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&ack)
			resp.Body.Close()
		}
		switch {
		case status == http.StatusOK:
			s.mu.Lock()
			s.acks[eventID] = append(s.acks[eventID], ack.Duplicate)
			s.mu.Unlock()
			s.deliveries.Add(1)
			return nil
		case status != 0 && status < 500 && status != http.StatusTooManyRequests:
			return fmt.Errorf("payment event %s: answered %d", eventID, status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("payment event %s: not acknowledged before the deadline (last: %d, %v)", eventID, status, err)
		}
		s.retries.Add(1)
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}

// backoff is a jittered wait between 100 ms and about 1.5 s.
func backoff(attempt int) time.Duration {
	d := min(100*time.Millisecond<<min(attempt, 4), 1500*time.Millisecond)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
