package httpjson

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestErrorsCarryTheRequestID(t *testing.T) {
	h := WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, http.StatusNotFound, CodeNotFound, "no such task")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/tasks/x", nil))

	id := rec.Header().Get(HeaderRequestID)
	if !strings.HasPrefix(id, "req_") || len(id) != 28 {
		t.Fatalf("X-Request-Id = %q", id)
	}
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error != (Error{Code: CodeNotFound, Message: "no such task", RequestID: id}) {
		t.Fatalf("body = %+v", body)
	}
	if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

func TestIncomingRequestIDIsKeptOnlyWhenWellFormed(t *testing.T) {
	for in, keep := range map[string]bool{"req_abc123": true, "req_<script>": false, "abc": false, "": false} {
		h := WithRequestID(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(HeaderRequestID, in)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get(HeaderRequestID); (got == in) != keep {
			t.Errorf("incoming %q: response id %q, keep=%v", in, got, keep)
		}
	}
}

// A handler that wraps itself (the webhook ingress, the Event Service, the blob server) and is
// mounted behind the apiserver's WithRequestID answers and logs with the apiserver's id.
func TestAnInnerWithRequestIDKeepsTheOuterID(t *testing.T) {
	var outer, inner string // the ids the apiserver's log line and the inner handler see
	h := WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outer = RequestID(r.Context())
		WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner = RequestID(r.Context())
			WriteError(w, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "POST only")
		})).ServeHTTP(w, r)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if id := rec.Header().Get(HeaderRequestID); id == "" || outer != id || inner != id || body.Error.RequestID != id {
		t.Fatalf("response header %q, outer id %q, inner id %q, body's id %q: want one id", id, outer, inner, body.Error.RequestID)
	}
}

func TestEchoAndMessagesAreBounded(t *testing.T) {
	if got := Echo("vt-abc"); got != `"vt-abc"` {
		t.Errorf("Echo of a short value = %s", got)
	}
	long := strings.Repeat("é", 1<<20)
	got := Echo(long)
	if len(got) > 100 || !strings.HasSuffix(got, `…" (2097152 bytes)`) || !utf8.ValidString(got) {
		t.Errorf("Echo of 2 MB = %s", got)
	}

	h := WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, http.StatusBadRequest, CodeInvalidRequest, "bad: "+long)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Error.Message) > MaxMessageBytes || !strings.HasPrefix(body.Error.Message, "bad: é") || !utf8.ValidString(body.Error.Message) {
		t.Errorf("a 2 MB message was written as %d bytes", len(body.Error.Message))
	}
}
