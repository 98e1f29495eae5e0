package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
	videogenstandardwebhooks "github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// The receiver accepts what the manager's sender sends, once per task, and refuses a delivery
// signed with another secret or altered on the way.
func TestReceiverVerifiesDeliveries(t *testing.T) {
	secret := videogenstandardwebhooks.NewSecret()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(receiver(wh))
	defer srv.Close()
	client := outbound.NewGuardedClient(netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 5*time.Second)
	body := []byte(`{"id":"vt-1","object":"task","status":"succeeded","result":{"video_url":"https://cdn.example.com/r.mp4"},"error":null}`)
	ctx := context.Background()

	for i := range 2 { // the second is a redelivery
		if res := outbound.Send(ctx, client, outbound.Message{URL: srv.URL, ID: "msg_1", Secrets: []string{secret}, Body: body}, time.Now()); res.Status != http.StatusNoContent {
			t.Fatalf("delivery %d: %d %v", i+1, res.Status, res.Err)
		}
	}
	if res := outbound.Send(ctx, client, outbound.Message{URL: srv.URL, ID: "msg_2", Secrets: []string{videogenstandardwebhooks.NewSecret()}, Body: body}, time.Now()); res.Status != http.StatusBadRequest {
		t.Errorf("signed with another secret: %d, want 400", res.Status)
	}
	if res := outbound.Send(ctx, client, outbound.Message{URL: srv.URL, ID: "msg_3", Secrets: []string{secret}, Body: body}, time.Now().Add(-time.Hour)); res.Status != http.StatusBadRequest {
		t.Errorf("signed an hour ago: %d, want 400", res.Status)
	}
	// Altered in transit: signed for one body, sent with another.
	h := http.Header{}
	if err := videogenstandardwebhooks.SetHeaders(h, secret, "msg_4", time.Now(), body); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Replace(string(body), "succeeded", "failed", 1)))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("altered body: %d, want 400", resp.StatusCode)
	}
}

// docs/api.md shows this program as it is.
func TestDocsShowTheReceiver(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(src)+"```\n") {
		t.Error("docs/api.md does not show docs/examples/webhookreceiver/main.go as it is: copy it into the go block there")
	}
}
