package eventservice_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
)

// A gzip bomb from a token holder (200 MiB of JSON whitespace in about 200 KiB) is refused
// once its inflating passes the message limit: connect's own gzip inflated all of it to
// report its size ("message size 209715200 is larger than …"), a thousand times the work of
// the bytes sent.
func TestAGzipBombIsRefusedWithoutInflatingIt(t *testing.T) {
	srv := startH2CServer(t, newService(t))
	var compressed bytes.Buffer
	zw := gzip.NewWriter(&compressed)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	if _, err := zw.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := zw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := zw.Write([]byte("}")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+eventsv1connect.EventServiceHandleProcedure, &compressed)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+serviceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(out), "resource_exhausted") {
		t.Fatalf("status %d: %s, want resource_exhausted", resp.StatusCode, out)
	}
	if strings.Contains(string(out), "209715202") {
		t.Fatalf("the whole bomb was inflated to measure it: %s", out)
	}
}
