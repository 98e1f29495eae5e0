package fetcher

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
)

var loopbackOnly = netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestDownloadsIntoAFile(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("media bytes")) })
	path := filepath.Join(t.TempDir(), "in")
	if err := New(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/a.mp4", path); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "media bytes" {
		t.Errorf("file = %q", got)
	}
}

func TestRefusesPrivateDestinationsUnlessAllowed(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("secret")) })
	err := New(netguard.Policy{}, 1024, time.Second).ToFile(context.Background(), srv.URL+"/", filepath.Join(t.TempDir(), "in"))
	if !errors.Is(err, netguard.ErrForbiddenDestination) {
		t.Fatalf("err = %v, want a forbidden destination", err)
	}
}

func TestRechecksEveryRedirectHop(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.2:1/metadata", http.StatusFound)
	})
	err := New(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/", filepath.Join(t.TempDir(), "in"))
	if !errors.Is(err, netguard.ErrForbiddenDestination) {
		t.Fatalf("err = %v, want the redirect target refused", err)
	}
}

func TestStopsAtTheSizeLimit(t *testing.T) {
	big := strings.Repeat("x", 4096)
	declared := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(big)) })
	streamed := serve(t, func(w http.ResponseWriter, r *http.Request) {
		for range 4 {
			w.Write([]byte(big[:1024]))
			w.(http.Flusher).Flush() // chunked: no Content-Length to check up front
		}
	})
	for name, srv := range map[string]*httptest.Server{"declared": declared, "streamed": streamed} {
		err := New(loopbackOnly, 1000, time.Second).ToFile(context.Background(), srv.URL+"/", filepath.Join(t.TempDir(), "in"))
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: err = %v, want ErrTooLarge", name, err)
		}
	}
}

func TestGivesUpAfterTheTimeout(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	start := time.Now()
	err := New(loopbackOnly, 1024, 100*time.Millisecond).ToFile(context.Background(), srv.URL+"/", filepath.Join(t.TempDir(), "in"))
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %s, want a timeout after about 100ms", err, time.Since(start))
	}
}

func TestMessagesNameTheURLWithoutItsQuery(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	err := New(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/face.jpg?X-Amz-Signature=abc", filepath.Join(t.TempDir(), "in"))
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") || strings.Contains(err.Error(), "Signature") {
		t.Fatalf("err = %v", err)
	}
}

// A failure becomes a task's error message: it says what failed, not where our resolver is or
// what our own address is (the detail is kept for the worker's log).
func TestFailuresShowNoAddressOfOurNetwork(t *testing.T) {
	closed := serve(t, func(http.ResponseWriter, *http.Request) {})
	closed.Close() // a port nothing listens on
	internal := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+|\[[0-9a-f:]+\]:\d+| on `)
	for _, c := range []struct{ url, want string }{
		{"http://no-such-host.invalid/face.jpg", "could not resolve host no-such-host.invalid"},
		{closed.URL + "/face.jpg", "could not connect to the host: connection refused"},
	} {
		err := New(loopbackOnly, 1024, 5*time.Second).ToFile(context.Background(), c.url, filepath.Join(t.TempDir(), "in"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ToFile(%s) = %v, want it to say %q", c.url, err, c.want)
			continue
		}
		// The URL's own host and port are the caller's; what follows them must be none of ours.
		if _, rest, _ := strings.Cut(err.Error(), c.url); internal.MatchString(rest) {
			t.Errorf("ToFile(%s) = %q, which shows an address of our network", c.url, err)
		}
		var detail interface{ Detail() string }
		if !errors.As(err, &detail) || detail.Detail() == "" {
			t.Errorf("ToFile(%s) = %v keeps no detail for the log", c.url, err)
		}
	}
}
