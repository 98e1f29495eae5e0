package blobstore

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
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
