package blobstore

import (
	"context"
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
	for _, bad := range []string{"../etc/passwd", "..%2f..%2fetc", "short.png", strings.Repeat("a", 32) + ".png"} {
		resp, err := http.Get(srv.URL + "/v1/blobs/" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %q = %d, want 404", bad, resp.StatusCode)
		}
	}
}
