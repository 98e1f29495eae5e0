package webhookingress_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// Round 29 (payment tour): POST /v1/webhooks/<200 x's> was answered `no webhook connector named
// "xxx…"`: cut, but without the length docs/api.md promises for every value quoted back ("cut to
// 64 bytes with their length said"), so the caller could not tell a typo from a cut name. It is
// quoted as every other error of the apiserver quotes a value now.
func TestAdversarial29UnknownConnectorIsQuotedWithItsLength(t *testing.T) {
	h, _ := adv21Ingress(t, time.Unix(1767225600, 0), 0)
	name := strings.Repeat("x", 200)
	req, err := http.NewRequest(http.MethodPost, "/v1/webhooks/"+name, bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.ServeHTTP(rec, req)
	var answer struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.body.Bytes(), &answer); err != nil {
		t.Fatalf("%d %s: %v", rec.code, rec.body.String(), err)
	}
	if rec.code != http.StatusNotFound || answer.Error.Code != "not_found" || !strings.Contains(answer.Error.Message, httpjson.Echo(name)) {
		t.Errorf("unknown connector of 200 bytes: %d %s, want 404 not_found quoting %s", rec.code, rec.body.String(), httpjson.Echo(name))
	}
}
