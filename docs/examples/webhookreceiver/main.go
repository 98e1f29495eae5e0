// Command webhookreceiver receives videogen's completion webhooks: it verifies each delivery
// with the official Standard Webhooks library before it trusts the body (docs/api.md shows it).
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	// Your account's secret: GET /v1/webhook-secret answers {"secret": "whsec_…"}.
	wh, err := standardwebhooks.NewWebhook(os.Getenv("VIDEOGEN_WEBHOOK_SECRET"))
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("POST /videogen/done", receiver(wh))
	log.Fatal(http.ListenAndServe(":8000", nil))
}

func receiver(wh *standardwebhooks.Webhook) http.Handler {
	var seen sync.Map // webhook-id of every task handled: a delivery may come more than once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		// Checks the HMAC of "webhook-id.webhook-timestamp.body" against every signature in
		// webhook-signature, and that the timestamp is within five minutes of now.
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "invalid signature", http.StatusBadRequest)
			return
		}
		if _, dup := seen.LoadOrStore(r.Header.Get("webhook-id"), true); dup {
			w.WriteHeader(http.StatusNoContent) // already handled: acknowledge again
			return
		}
		var task struct {
			ID     string `json:"id"`
			Status string `json:"status"` // succeeded, failed or canceled
			Result *struct {
				VideoURL string `json:"video_url"`
				ImageURL string `json:"image_url"`
			} `json:"result"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &task); err != nil {
			http.Error(w, "not a task", http.StatusBadRequest)
			return
		}
		switch {
		case task.Result != nil:
			log.Printf("task %s %s: %s%s", task.ID, task.Status, task.Result.VideoURL, task.Result.ImageURL)
		case task.Error != nil:
			log.Printf("task %s %s: %s (%s)", task.ID, task.Status, task.Error.Message, task.Error.Code)
		default:
			log.Printf("task %s %s", task.ID, task.Status)
		}
		w.WriteHeader(http.StatusNoContent) // any 2xx ends the delivery
	})
}
