package blobstore

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDirStoresAndServes(t *testing.T) {
	d := &Dir{Root: t.TempDir()}
	srv := httptest.NewServer(d.Handler("/v1/blobs/"))
	defer srv.Close()
	d.BaseURL = srv.URL + "/v1/blobs/"

	url, err := d.Put(context.Background(), "image/png", []byte("png-bytes"))
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
