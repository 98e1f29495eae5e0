package apiserver

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// Found by a tenant's tour: inline faces of up to 16 MiB a request, kept while their tasks live
// (a cancelled task's for a day), filled the apiserver's 2 GiB emptyDir in about 220 requests,
// and the kubelet evicts a pod past its sizeLimit: the REST API and the manager down, every
// upload lost. With the store at its bound (--blob-dir-max-bytes) an inline face is refused with
// a 503 that says what to do, nothing stored or frozen, and a face given by URL still runs.
func TestAnInlineFaceIsRefusedWhenTheBlobStoreIsFull(t *testing.T) {
	face := pngFace(t)
	tmpl := studioTemplate()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tmpl).Build()
	l := &accountLedger{available: 100}
	blobs := &blobstore.Dir{Root: t.TempDir(), BaseURL: "http://apiserver.test/v1/blobs/", MaxBytes: int64(len(face)) / 2}
	s := New(Config{Client: c, APIReader: c, Ledger: l, Blobs: blobs, DefaultPrice: 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	submit := func(faceField string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/videos/short",
			strings.NewReader(`{"template_id":"studio","face":"`+faceField+`"}`))
		req.Header.Set("Content-Type", "application/json")
		return serveAs(s.createShort, "acct", req)
	}

	rec := submit(face)
	var e struct {
		Error struct{ Code, Message, RequestID string } `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != http.StatusServiceUnavailable || err != nil ||
		e.Error.Code != "service_unavailable" || !strings.Contains(e.Error.Message, "storage for uploaded images is full") ||
		rec.Header().Get("Retry-After") == "" {
		t.Fatalf("an inline face with the store full: %d %s (Retry-After %q); want 503 service_unavailable saying the storage is full",
			rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if l.creates != 0 {
		t.Errorf("the ledger was asked to create %d tasks; want none", l.creates)
	}
	if stored, err := os.ReadDir(blobs.Root); err != nil || len(stored) != 0 {
		t.Errorf("the blob store holds %d files (%v); want none", len(stored), err)
	}

	if rec := submit("https://media.example/face.jpg"); rec.Code != http.StatusAccepted || l.creates != 1 {
		t.Errorf("a face given by URL with the store full: %d %s, %d creates; want 202 and one", rec.Code, rec.Body, l.creates)
	}
}
