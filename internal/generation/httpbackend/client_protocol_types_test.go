package httpbackend

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/generation"
)

// A backend
// that answers a stage's GET in valid JSON whose fields have the wrong types (outputs holding
// numbers or objects, against docs/backend-protocol.md: "outputs": string to string) gives the
// same answer at every poll. Input: GET /v1/stages/{id} answered 200 with
// {"state":"succeeded","outputs":{"frames":120}}; or the stage's id is so long (the backend
// chose it) that the server or a proxy in front of it answers 414 to every GET naming it.
// The client returned an ordinary error: the controller took each look for an outage
// ("backend unavailable: …", a Warning event) and polled until the task's timeout, hours
// later, then TimedOut and refunded. The fix: both are permanent errors, so the stage fails at
// once (refunded) with a message that says the backend's answer broke the protocol. A 200 that
// is not JSON at all (a proxy's HTML page, a backend being replaced) stays an outage, retried.
// Failed before the fix with IsPermanent false for both.
func TestAnAnswerThatBreaksTheProtocolIsPermanent(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		want   bool
	}{
		"outputs not strings": {http.StatusOK, `{"id":"stg_1","state":"succeeded","progress":100,"outputs":{"frames":120}}`, true},
		"414":                 {http.StatusRequestURITooLong, `URI Too Long`, true},
		"html (holds)":        {http.StatusOK, `<html>maintenance</html>`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		c := newClient(t, srv.URL, nil)
		_, err := c.Observe(context.Background(), work(), "stg_1")
		srv.Close()
		if err == nil {
			t.Errorf("%s: Observe succeeded", name)
			continue
		}
		if got := generation.IsPermanent(err); got != tc.want {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", name, err, got, tc.want)
		}
		if generation.IsLost(err) {
			t.Errorf("%s: %v says the stage was lost", name, err)
		}
		if tc.want && !strings.Contains(generation.RefusalOf(err), "protocol") {
			t.Errorf("%s: the caller is told %q, not that the backend broke the protocol", name, generation.RefusalOf(err))
		}
	}
}
