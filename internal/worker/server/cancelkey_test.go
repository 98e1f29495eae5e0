package server

import (
	"net/http"
	"strings"
	"testing"
)

// POST /v1/stages/cancel {"key": ...} stops the stage submitted under that key, for a caller
// that never learned the stage's id (the operator after a status write that recorded it was
// lost). Like a cancel by id it answers 204 whether or not the key is known.
func TestCancelByKeyStopsTheStageAndForgivesUnknownKeys(t *testing.T) {
	srv := newServer(t, "")
	key := "acme/t/6f1c2a9e-3b1d-4f7e-9a51-2c8d0e7b4a10/render"
	_, st := call(t, "POST", srv.URL+"/v1/stages", "", `{"key":"`+key+`","capability":"slow","stage":"render"}`)
	id := st["id"].(string)
	if code, body := call(t, "POST", srv.URL+"/v1/stages/cancel", "", `{"key":"`+key+`"}`); code != 204 {
		t.Fatalf("cancel by key = %d %v, want 204", code, body)
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "", ""); st["state"] != "failed" || st["message"] != "cancelled" {
		t.Errorf("after cancel by key: %v", st)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/cancel", "", `{"key":"acme/t/never/render"}`); code != 204 {
		t.Errorf("cancel of an unknown key = %d, want 204", code)
	}
	// Unknown fields are ignored, as the protocol says of every body (POST /v1/stages too).
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/cancel", "", `{"key":"`+key+`","reason":"deleted"}`); code != 204 {
		t.Errorf("cancel by key with a field to come = %d, want 204", code)
	}
}

// A body that names no key is refused with 400 invalid_request in the protocol's shape, and
// cancels nothing.
func TestCancelByKeyRefusesBodiesWithoutAKey(t *testing.T) {
	srv := newServer(t, "")
	_, st := call(t, "POST", srv.URL+"/v1/stages", "", `{"key":"k","capability":"slow","stage":"render"}`)
	id := st["id"].(string)
	for body, want := range map[string]string{
		``:                    "the body is empty",
		`{"key":`:             "the body ends too early",
		`{"key" 1}`:           "malformed JSON at byte",
		`[]`:                  "it must be a JSON object, not array",
		`"k"`:                 "it must be a JSON object, not string",
		`{"key":5}`:           "field key must be a string, not number",
		`{"key":["k"]}`:       "field key must be a string, not array",
		`{}`:                  "key is required",
		`{"key":null}`:        "key is required",
		`{"key":""}`:          "key is required",
		`{"id":"` + id + `"}`: "key is required",
		`{"key":"` + strings.Repeat("k", 1025) + `"}`:   "key is longer than 1024 bytes",
		`{"key":"` + strings.Repeat("k", 70<<10) + `"}`: "larger than 65536 bytes",
	} {
		code, out := call(t, "POST", srv.URL+"/v1/stages/cancel", "", body)
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code != 400 || errorCode(out) != "invalid_request" || !strings.Contains(msg, want) || strings.Contains(msg, "Go ") {
			t.Errorf("POST /v1/stages/cancel %.40q = %d %v, want 400 invalid_request saying %q", body, code, out, want)
		}
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "", ""); st["state"] != "running" {
		t.Errorf("a refused cancel stopped the stage: %v", st)
	}
}

// The new pattern shadows no stage and clashes with none: a stage's id is "stg_" and hex,
// never "cancel", so GET /v1/stages/cancel is an unknown stage (404), as before; another
// method there is 405 naming every method the path has; and cancelling by id still works.
func TestCancelByKeyLeavesTheStagePathsAsTheyWere(t *testing.T) {
	srv := newServer(t, "tok")
	if code, body := call(t, "GET", srv.URL+"/v1/stages/cancel", "tok", ""); code != 404 || errorCode(body) != "not_found" {
		t.Errorf("GET /v1/stages/cancel = %d %v, want 404 not_found", code, body)
	}
	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/stages/cancel", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("DELETE /v1/stages/cancel = %d Allow %q, want 405 Allow \"GET, HEAD, POST\"", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/cancel/more", "tok", `{"key":"k"}`); code != 404 {
		t.Errorf("POST /v1/stages/cancel/more = %d, want 404", code)
	}
	_, st := call(t, "POST", srv.URL+"/v1/stages", "tok", `{"key":"k","capability":"slow","stage":"render"}`)
	id := st["id"].(string)
	if code, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "tok", ""); code != 200 || st["id"] != id {
		t.Errorf("GET a real stage = %d %v", code, st)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/"+id+"/cancel", "tok", ""); code != 204 {
		t.Errorf("cancel by id = %d", code)
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "tok", ""); st["message"] != "cancelled" {
		t.Errorf("after cancel by id: %v", st)
	}
}

// Cancelling by key stops work like any call: only for a caller with the token.
func TestCancelByKeyRequiresTheToken(t *testing.T) {
	srv := newServer(t, "s3cret")
	_, st := call(t, "POST", srv.URL+"/v1/stages", "s3cret", `{"key":"k","capability":"slow","stage":"render"}`)
	id := st["id"].(string)
	for _, token := range []string{"", "wrong"} {
		if code, body := call(t, "POST", srv.URL+"/v1/stages/cancel", token, `{"key":"k"}`); code != 401 || errorCode(body) != "unauthorized" {
			t.Errorf("cancel by key with token %q = %d %v, want 401 unauthorized", token, code, body)
		}
		// Not even the body is judged first.
		if code, _ := call(t, "POST", srv.URL+"/v1/stages/cancel", token, `[]`); code != 401 {
			t.Errorf("bad body with token %q = %d, want 401", token, code)
		}
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "s3cret", ""); st["state"] != "running" {
		t.Errorf("an unauthenticated cancel stopped the stage: %v", st)
	}
	if code, _ := call(t, "POST", srv.URL+"/v1/stages/cancel", "s3cret", `{"key":"k"}`); code != 204 {
		t.Errorf("cancel by key with the token = %d", code)
	}
	if _, st := call(t, "GET", srv.URL+"/v1/stages/"+id, "s3cret", ""); st["message"] != "cancelled" {
		t.Errorf("after cancel by key: %v", st)
	}
	srvNone := newServerWith(t, Auth{})
	if code, _ := call(t, "POST", srvNone.URL+"/v1/stages/cancel", "anything", `{"key":"k"}`); code != 401 {
		t.Errorf("a server without a token: cancel by key = %d, want 401", code)
	}
}
