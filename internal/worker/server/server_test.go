package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/capability"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// instant prepares stages that finish at once, or wait for their cancellation.
type instant struct{}

func (instant) Prepare(req protocol.StageRequest) (jobs.Func, error) {
	switch req.Capability {
	case "video.template":
		return func(context.Context, jobs.Report) (jobs.Outcome, error) {
			return jobs.Outcome{Outputs: map[string]string{"seen": req.Key}}, nil
		}, nil
	case "slow":
		return func(ctx context.Context, _ jobs.Report) (jobs.Outcome, error) {
			<-ctx.Done()
			return jobs.Outcome{}, ctx.Err()
		}, nil
	case "bad":
		return nil, fmt.Errorf("%w: duration is required", capability.ErrInvalid)
	}
	return nil, fmt.Errorf("%w: %s", capability.ErrUnsupported, req.Capability)
}

// newServer serves the protocol; an empty token turns auth off.
func newServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	return newServerWith(t, Auth{Token: token, Disabled: token == ""})
}

func newServerWith(t *testing.T, auth Auth) *httptest.Server {
	t.Helper()
	table := jobs.New(context.Background(), jobs.Config{MaxConcurrent: 2, MaxQueued: 4, TTL: time.Hour})
	srv := httptest.NewServer(New(instant{}, table, auth, nil).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestSubmitIsIdempotentByKey(t *testing.T) {
	srv := newServer(t, "")
	body := `{"key":"ns/t/uid/analyze","capability":"video.template","stage":"analyze"}`
	code1, first := call(t, "POST", srv.URL+"/v1/stages", "", body)
	code2, second := call(t, "POST", srv.URL+"/v1/stages", "", body)
	if code1 != 201 || code2 != 200 || first["id"] != second["id"] || first["id"] == "" {
		t.Fatalf("first %d %v, second %d %v", code1, first, code2, second)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, st := call(t, "GET", srv.URL+"/v1/stages/"+first["id"].(string), "", "")
		if st["state"] == "succeeded" {
			if st["outputs"].(map[string]any)["seen"] != "ns/t/uid/analyze" || st["progress"] != 100.0 {
				t.Errorf("status = %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stage never succeeded: %v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRefusalsUseTheErrorShape(t *testing.T) {
	srv := newServer(t, "")
	cases := []struct {
		method, path, body string
		code               int
		errCode            string
	}{
		{"POST", "/v1/stages", `{"key":`, 400, "invalid_request"},
		{"POST", "/v1/stages", `{"key":"k","capability":"bad","stage":"analyze"}`, 422, "invalid_request"},
		{"POST", "/v1/stages", `{"key":"k","capability":"video.hologram","stage":"analyze"}`, 422, "unsupported"},
		{"GET", "/v1/stages/stg_nope", "", 404, "not_found"},
	}
	for _, c := range cases {
		code, body := call(t, c.method, srv.URL+c.path, "", c.body)
		if code != c.code || errorCode(body) != c.errCode {
			t.Errorf("%s %s %s = %d %v, want %d %s", c.method, c.path, c.body, code, body, c.code, c.errCode)
		}
	}
}

// A wrong method on a protocol path, or a path under /v1/stages that is none, is answered in
// the protocol's error shape (it was net/http's text/plain "Method Not Allowed" and "404 page
// not found"), and only to a caller with the token.
func TestWrongMethodsAndPathsUseTheErrorShapeAfterTheToken(t *testing.T) {
	srv := newServer(t, "tok")
	cases := []struct {
		method, path, token string
		code                int
		errCode, allow      string
	}{
		{"GET", "/v1/stages", "tok", 405, "method_not_allowed", "POST"},
		{"DELETE", "/v1/stages/stg_x", "tok", 405, "method_not_allowed", "GET, HEAD"},
		{"GET", "/v1/stages/stg_x/cancel", "tok", 405, "method_not_allowed", "POST"},
		{"GET", "/v1/stages/stg_x/cancel/more", "tok", 404, "not_found", ""},
		{"GET", "/v1/stages", "", 401, "unauthorized", ""},
		{"GET", "/v1/stages/stg_x/cancel/more", "wrong", 401, "unauthorized", ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		decodeErr := json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.code || decodeErr != nil || errorCode(body) != c.errCode || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s (token %q) = %d %v Allow %q (%v), want %d %s Allow %q",
				c.method, c.path, c.token, resp.StatusCode, body, resp.Header.Get("Allow"), decodeErr, c.code, c.errCode, c.allow)
		}
	}
}

// A malformed submission is described in the protocol's terms, not encoding/json's: no
// "Go struct field StageRequest.key", no time layout "2006-01-02T15:04:05Z07:00".
func TestMalformedSubmissionsAreDescribedWithoutGoInternals(t *testing.T) {
	srv := newServer(t, "")
	for body, want := range map[string]string{
		`{"key":5}`: "field key must be a string, not number",
		`{"key":"k","capability":"video.template","stage":"analyze","inputs":[]}`:           "field inputs must be an object, not array",
		`{"key":"k","capability":"video.template","stage":"analyze","duration":"5"}`:        "field duration must be a number, not string",
		`{"key":"k","capability":"video.template","stage":"analyze","deadline":"tomorrow"}`: "deadline must be an RFC 3339 time",
		`[]`:        "it must be a JSON object, not array",
		`{"key":`:   "the body ends too early",
		`{"key" 1}`: "malformed JSON at byte",
		``:          "the body is empty",
	} {
		code, out := call(t, "POST", srv.URL+"/v1/stages", "", body)
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code != 400 || !strings.Contains(msg, want) || strings.Contains(msg, "Go ") || strings.Contains(msg, "2006") || strings.Contains(msg, "json:") {
			t.Errorf("POST %s = %d %q, want 400 saying %q", body, code, msg, want)
		}
	}
}

func TestCancelStopsAStageAndForgivesUnknownIDs(t *testing.T) {
	srv := newServer(t, "")
	_, st := call(t, "POST", srv.URL+"/v1/stages", "", `{"key":"k","capability":"slow","stage":"render"}`)
	id := st["id"].(string)
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/"+id+"/cancel", "", ""); code != 204 {
		t.Errorf("cancel = %d", code)
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "", ""); st["state"] != "failed" || st["message"] != "cancelled" {
		t.Errorf("after cancel: %v", st)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/stg_unknown/cancel", "", ""); code != 204 {
		t.Errorf("cancel of an unknown stage = %d, want 204", code)
	}
}

func TestATokenIsRequiredWhenConfigured(t *testing.T) {
	srv := newServer(t, "s3cret")
	body := `{"key":"k","capability":"video.template","stage":"analyze"}`
	if code, b := call(t, "POST", srv.URL+"/v1/stages", "", body); code != 401 || errorCode(b) != "unauthorized" {
		t.Errorf("no token: %d %v", code, b)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages", "wrong", body); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages", "s3cret", body); code != 201 {
		t.Errorf("right token: %d", code)
	}
}

// Without a token and without auth turned off explicitly, nobody gets in.
func TestAServerWithoutATokenRefusesEveryone(t *testing.T) {
	srv := newServerWith(t, Auth{})
	body := `{"key":"k","capability":"video.template","stage":"analyze"}`
	for _, token := range []string{"", "anything"} {
		if code, b := call(t, "POST", srv.URL+"/v1/stages", token, body); code != 401 || errorCode(b) != "unauthorized" {
			t.Errorf("submit with token %q: %d %v", token, code, b)
		}
		if code, _ := call(t, "POST", srv.URL+"/v1/stages/stg_x/cancel", token, ""); code != 401 {
			t.Errorf("cancel with token %q: %d", token, code)
		}
		if code, _ := call(t, "GET", srv.URL+"/v1/stages/stg_x", token, ""); code != 401 {
			t.Errorf("observe with token %q: %d", token, code)
		}
	}
}

func TestTheBearerSchemeIsCaseInsensitive(t *testing.T) {
	srv := newServer(t, "s3cret")
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/stages/stg_nope", nil)
		req.Header.Set("Authorization", scheme+" s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404 (authenticated, no such stage)", scheme, resp.StatusCode)
		}
	}
}
