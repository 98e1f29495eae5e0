package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDirStoresAndServes(t *testing.T) {
	d := &Dir{Root: t.TempDir()}
	srv := httptest.NewServer(d.Handler("/v1/blobs/"))
	defer srv.Close()
	d.BaseURL = srv.URL + "/v1/blobs/"

	url, err := d.Put(context.Background(), NewName("image/png"), "image/png", []byte("png-bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, d.BaseURL) || !strings.HasSuffix(url, ".png") {
		t.Fatalf("url = %q", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "png-bytes" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	for _, bad := range []string{"../etc/passwd", "..%2f..%2fetc", "short.png", strings.Repeat("a", 32) + ".png", strings.Repeat("b", 32) + ".png"} {
		resp, err := http.Get(srv.URL + "/v1/blobs/" + bad)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Code      string `json:"code"`
				RequestID string `json:"request_id"`
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 404 || err != nil || e.Error.Code != "not_found" || e.Error.RequestID == "" ||
			e.Error.RequestID != resp.Header.Get("X-Request-Id") {
			t.Errorf("GET %q = %d %+v (%v), want 404 in the error envelope", bad, resp.StatusCode, e, err)
		}
	}
}

// Retries of one request put the same name: the second Put keeps the first file.
func TestDirPutsAContentNameOnce(t *testing.T) {
	d := &Dir{Root: t.TempDir(), BaseURL: "http://blobs.example/"}
	name := ContentName("vt-task", "image/jpeg", []byte("face"))
	if !validName.MatchString(name) || !strings.HasSuffix(name, ".jpg") {
		t.Fatalf("ContentName = %q, want 64 hex digits and .jpg", name)
	}
	if other := ContentName("vt-other", "image/jpeg", []byte("face")); other == name {
		t.Fatalf("two scopes share the name %q", name)
	}
	first, err := d.Put(context.Background(), name, "image/jpeg", []byte("face"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := d.Put(context.Background(), name, "image/jpeg", []byte("face"))
	if err != nil || second != first {
		t.Fatalf("second Put = %q, %v; want %q", second, err, first)
	}
	entries, _ := os.ReadDir(d.Root)
	if len(entries) != 1 || entries[0].Name() != name {
		t.Fatalf("the store holds %v, want only %s", entries, name)
	}
	if _, err := d.Put(context.Background(), "../escape.png", "image/png", []byte("x")); err == nil {
		t.Fatal("Put accepted a name that is not a blob name")
	}
}

// What a sweep of stray blobs needs: List tells each blob's last put (a put again counts),
// Delete removes one, and deleting it again is no error.
func TestDirListsAndDeletes(t *testing.T) {
	d := &Dir{Root: t.TempDir(), BaseURL: "http://blobs.example/"}
	ctx := context.Background()
	face := ContentName("vt-task", "image/png", []byte("face"))
	result := NewName("video/mp4")
	for _, name := range []string{face, result} {
		if _, err := d.Put(ctx, name, "", []byte("bytes")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d.Root, ".upload-123"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(d.Root, face), longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(ctx, face, "image/png", []byte("face")); err != nil { // a retry of the request
		t.Fatal(err)
	}
	listed := map[string]time.Time{}
	if err := d.List(ctx, func(name string, put time.Time) error { listed[name] = put; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[face].IsZero() || listed[result].IsZero() {
		t.Fatalf("List = %v, want %s and %s (and no upload being written)", listed, face, result)
	}
	if time.Since(listed[face]) > time.Minute {
		t.Fatalf("%s was put again just now, List says %v", face, listed[face])
	}
	if put, err := d.Stat(ctx, face); err != nil || !put.Equal(listed[face]) {
		t.Fatalf("Stat(%s) = %v, %v; want %v as List says", face, put, err, listed[face])
	}
	if !IsContentName(face) || IsContentName(result) {
		t.Fatalf("IsContentName(%s), IsContentName(%s) = %v, %v; want true, false", face, result, IsContentName(face), IsContentName(result))
	}
	for range 2 {
		if err := d.Delete(ctx, face); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(d.Root); len(entries) != 2 { // the result and the upload
		t.Fatalf("after Delete the store holds %v", entries)
	}
	if _, err := d.Stat(ctx, face); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a deleted blob = %v, want ErrNotFound", err)
	}
	if err := d.Delete(ctx, "../escape.png"); err == nil {
		t.Fatal("Delete accepted a name that is not a blob name")
	}
}

func TestNameIn(t *testing.T) {
	name := ContentName("vt-task", "image/jpeg", []byte("face"))
	for _, u := range []string{
		"http://api.example/v1/blobs/" + name,
		"https://s3.example/uploads/faces/" + name + "?X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"https://cdn.example/up-" + name,
	} {
		if got := NameIn(u); got != name {
			t.Errorf("NameIn(%s) = %q, want %s", u, got, name)
		}
	}
	for _, u := range []string{"https://cdn.example.com/face.jpg", "http://worker/v1/blobs/" + NewName("video/mp4"), "::"} {
		if got := NameIn(u); got != "" {
			t.Errorf("NameIn(%s) = %q, want none", u, got)
		}
	}
}

// What breaks: GET /v1/blobs/<name> hands the request to
// http.ServeContent, which answers a Range it cannot satisfy (bytes=999999-, or a malformed
// one) with a text/plain 416 "invalid range: failed to overlap", and an If-Match or
// If-Unmodified-Since that fails with an empty 412: not the error envelope every other
// answer of the apiserver's port carries, and without a request id to quote.
//
// Input: a client (a generation backend, a download tool resuming a transfer, curl -r) sends
// the header with a blob's URL as the task showed it. Nothing races.
//
// What the user sees: an answer its client cannot parse as the API's error, and no request id.
func TestDirAnswersRangeAndPreconditionFailuresInTheEnvelope(t *testing.T) {
	d := &Dir{Root: t.TempDir()}
	srv := httptest.NewServer(d.Handler("/v1/blobs/"))
	defer srv.Close()
	d.BaseURL = srv.URL + "/v1/blobs/"
	url, err := d.Put(context.Background(), NewName("image/png"), "image/png", []byte("png-bytes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		header, value string
		status        int
	}{
		{"Range", "bytes=999999-", http.StatusRequestedRangeNotSatisfiable},
		{"Range", "bytes=5-2", http.StatusRequestedRangeNotSatisfiable},
		{"If-Match", `"not-the-etag"`, http.StatusPreconditionFailed},
		{"If-Unmodified-Since", "Mon, 02 Jan 2006 15:04:05 GMT", http.StatusPreconditionFailed},
	} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set(tc.header, tc.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
			}
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		err = json.Unmarshal(raw, &e)
		if resp.StatusCode != tc.status || err != nil || e.Error.Code == "" || e.Error.Message == "" ||
			!strings.HasPrefix(e.Error.RequestID, "req_") || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET with %s: %s = %d %s %q, want %d in the error envelope", tc.header, tc.value,
				resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.status)
		}
		if resp.Header.Get("Cache-Control") != "" {
			t.Errorf("GET with %s: %s: the %d is cacheable: Cache-Control %q", tc.header, tc.value, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	}
	// A satisfiable range is still served.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Range", "bytes=0-2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || string(body) != "png" {
		t.Errorf("GET with Range: bytes=0-2 = %d %q, want 206 \"png\"", resp.StatusCode, body)
	}
}
