package fetcher

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
)

var loopbackOnly = netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// quick retries as the default ones do, without the seconds between attempts.
var quick = backoff{attempts: 4, first: 10 * time.Millisecond, factor: 3}

// newQuick is New with quick retries.
func newQuick(policy netguard.Policy, maxBytes int64, timeout time.Duration, opts ...Option) *Fetcher {
	f := New(policy, maxBytes, timeout, opts...)
	f.retries = quick
	return f
}

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

// The timeout bounds the download, its attempts included: a host that does not answer is not
// waited for again.
func TestGivesUpAfterTheTimeout(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	start := time.Now()
	err := New(loopbackOnly, 1024, 100*time.Millisecond).ToFile(context.Background(), srv.URL+"/", filepath.Join(t.TempDir(), "in"))
	if err == nil || !strings.Contains(err.Error(), "no answer before the timeout") || time.Since(start) > time.Second {
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
		err := newQuick(loopbackOnly, 1024, 5*time.Second).ToFile(context.Background(), c.url, filepath.Join(t.TempDir(), "in"))
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

// failing serves status to the first n requests and then the media; hits counts them all.
func failing(t *testing.T, n int32, status int, hits *atomic.Int32) *httptest.Server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= n {
			http.Error(w, "not now", status)
			return
		}
		w.Write([]byte("media bytes"))
	})
}

func TestTriesAgainWhileTheFailureMayPass(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusTooManyRequests, http.StatusRequestTimeout} {
		var hits atomic.Int32
		srv := failing(t, 3, status, &hits)
		path := filepath.Join(t.TempDir(), "in")
		if err := newQuick(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/face.jpg", path); err != nil {
			t.Errorf("HTTP %d three times, then 200: err = %v, want the fourth attempt to succeed", status, err)
			continue
		}
		if got, _ := os.ReadFile(path); string(got) != "media bytes" || hits.Load() != 4 {
			t.Errorf("HTTP %d three times, then 200: file %q after %d requests, want the media after 4", status, got, hits.Load())
		}
	}
}

func TestTriesAgainWhenTheHostRefusesTheConnection(t *testing.T) {
	// A port that refuses connections until a server starts listening on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	f := New(loopbackOnly, 1024, 5*time.Second)
	f.retries = backoff{attempts: 4, first: 200 * time.Millisecond, factor: 2}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("media bytes")) })}
	t.Cleanup(func() { srv.Close() })
	go func() {
		// After the first attempt, before the second. Should the port be taken meanwhile,
		// ToFile fails below.
		time.Sleep(100 * time.Millisecond)
		if l, err := net.Listen("tcp", addr); err == nil {
			srv.Serve(l)
		}
	}()
	if err := f.ToFile(context.Background(), "http://"+addr+"/face.jpg", filepath.Join(t.TempDir(), "in")); err != nil {
		t.Fatalf("err = %v, want the attempt after the host came up to succeed", err)
	}
}

func TestGivesUpAfterItsAttempts(t *testing.T) {
	var hits atomic.Int32
	srv := failing(t, 100, http.StatusServiceUnavailable, &hits)
	err := newQuick(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in"))
	var fe *Error
	if !errors.As(err, &fe) || fe.Attempts != 4 || hits.Load() != 4 || !strings.Contains(err.Error(), "HTTP 503 (tried 4 times)") {
		t.Fatalf("err = %v after %d requests, want HTTP 503 after 4 attempts", err, hits.Load())
	}
}

func TestDoesNotTryAgainWhatCannotPass(t *testing.T) {
	for name, c := range map[string]struct {
		answer func(w http.ResponseWriter, r *http.Request)
		check  func(error) bool
	}{
		"404": {http.NotFound, func(err error) bool { return strings.Contains(err.Error(), "HTTP 404") }},
		"403": {func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) },
			func(err error) bool { return strings.Contains(err.Error(), "HTTP 403") }},
		"too large": {func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("x", 2048))) },
			func(err error) bool { return errors.Is(err, ErrTooLarge) }},
		"a destination netguard refuses": {func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.2:1/metadata", http.StatusFound)
		}, func(err error) bool { return errors.Is(err, netguard.ErrForbiddenDestination) }},
	} {
		var hits atomic.Int32
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1); c.answer(w, r) })
		err := newQuick(loopbackOnly, 1024, time.Second).ToFile(context.Background(), srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in"))
		if err == nil || !c.check(err) || hits.Load() != 1 {
			t.Errorf("%s: err = %v after %d requests, want it after one", name, err, hits.Load())
		}
	}
}

func TestTheContextsDeadlineBoundsTheAttempts(t *testing.T) {
	var hits atomic.Int32
	srv := failing(t, 1000, http.StatusServiceUnavailable, &hits)
	f := New(loopbackOnly, 1024, time.Second)
	f.retries = backoff{attempts: 100, first: 100 * time.Millisecond, factor: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := f.ToFile(ctx, srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in"))
	took := time.Since(start)
	// About 4 attempts fit in 350 ms at 100 ms apart; all 100 would take 10 s.
	if n := hits.Load(); n < 2 || n > 6 || took > time.Second {
		t.Fatalf("%d attempts in %s, want a few within the context's 350 ms", n, took)
	}
	// The failure is the download's, not the context's.
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("err = %v, want the last attempt's HTTP 503", err)
	}
}

// asking answers status with Retry-After retryAfter to the first request, then the media.
func asking(t *testing.T, status int, retryAfter string, hits *atomic.Int32) *httptest.Server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "not now", status)
			return
		}
		w.Write([]byte("media bytes"))
	})
}

// recordWaits makes f take no wait between attempts but note each one.
func recordWaits(f *Fetcher) *[]time.Duration {
	var waits []time.Duration
	f.sleep = func(ctx context.Context, d time.Duration) bool {
		waits = append(waits, d)
		return true
	}
	return &waits
}

// A 429 or 503 that says when to come back is tried again then, not sooner, whether it says
// it in seconds or as an HTTP date; a shorter Retry-After than the planned wait, or one on
// another status, leaves the planned wait.
func TestWaitsWhatARetryAfterAsksWhenLonger(t *testing.T) {
	inHalfAMinute := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name, retryAfter string
		status           int
		atLeast, atMost  time.Duration
	}{
		{"503, seconds", "7", http.StatusServiceUnavailable, 7 * time.Second, 7 * time.Second},
		{"429, an HTTP date", inHalfAMinute, http.StatusTooManyRequests, 28 * time.Second, 30 * time.Second},
		{"shorter than the planned wait", "1", http.StatusServiceUnavailable, 5 * time.Second, 5 * time.Second},
		{"on a 502", "7", http.StatusBadGateway, 5 * time.Second, 5 * time.Second},
		{"malformed", "soon", http.StatusServiceUnavailable, 5 * time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := asking(t, tc.status, tc.retryAfter, &hits)
			f := New(loopbackOnly, 1024, time.Minute)
			f.retries = backoff{attempts: 4, first: 5 * time.Second, factor: 3}
			waits := recordWaits(f)
			path := filepath.Join(t.TempDir(), "in")
			if err := f.ToFile(context.Background(), srv.URL+"/face.jpg", path); err != nil {
				t.Fatalf("err = %v, want the second attempt to succeed", err)
			}
			if len(*waits) != 1 || (*waits)[0] < tc.atLeast || (*waits)[0] > tc.atMost || hits.Load() != 2 {
				t.Errorf("waited %v over %d requests, want one wait in [%s, %s]", *waits, hits.Load(), tc.atLeast, tc.atMost)
			}
		})
	}
}

// A Retry-After longer than the time the download has left (its --fetch-timeout, or the
// stage's deadline when that comes first) is not waited for: the download fails at once, and
// says why.
func TestARetryAfterPastTheDeadlineFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fetchTimeout time.Duration
		stage        time.Duration // the stage context's deadline (0: none)
	}{
		{"the fetch timeout", 2 * time.Second, 0},
		{"the stage's deadline", time.Minute, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := asking(t, http.StatusServiceUnavailable, "120", &hits)
			ctx := context.Background()
			if tc.stage > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.stage)
				defer cancel()
			}
			f := newQuick(loopbackOnly, 1024, tc.fetchTimeout)
			waits := recordWaits(f)
			start := time.Now()
			err := f.ToFile(ctx, srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in"))
			want := "HTTP 503 (the host asked to be tried again in 2m0s, after the time this download may take)"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want it to say %q", err, want)
			}
			if hits.Load() != 1 || len(*waits) != 0 || time.Since(start) > time.Second {
				t.Errorf("%d requests and waits %v in %s, want one request and no wait", hits.Load(), *waits, time.Since(start))
			}
		})
	}
}

// paced answers a body of chunks of size bytes, one every period from when its headers went,
// for as long as lasts (then it ends the body), or until the client goes away; hits counts
// the requests. A chunk that is late is sent with the next one, so a slow scheduler delays
// the body but does not make it smaller.
func paced(t *testing.T, size int, period, lasts time.Duration, hits *atomic.Int32) *httptest.Server {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) }) // runs before serve's srv.Close, which waits for handlers
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "video/mp4")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		start := time.Now()
		for i := 1; period*time.Duration(i) <= lasts; i++ {
			select {
			case <-time.After(time.Until(start.Add(period * time.Duration(i)))):
			case <-r.Context().Done():
				return
			case <-done:
				return
			}
			w.Write([]byte(strings.Repeat("x", size)))
			w.(http.Flusher).Flush()
		}
	})
}

// stalling answers its headers and 100 bytes, then nothing until the client goes away.
func stalling(t *testing.T, hits *atomic.Int32) *httptest.Server {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(strings.Repeat("x", 100)))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
}

// A source that answers and then sends too little (stalls, or trickles a byte at a time) is cut
// at the end of the first window, not at the fetch timeout, and not tried again: a host that
// trickles on purpose would trickle again.
func TestCutsABodySlowerThanTheMinimumRate(t *testing.T) {
	for name, c := range map[string]struct {
		source func(*testing.T, *atomic.Int32) *httptest.Server
		sent   string
	}{
		"stalls after 100 bytes": {stalling, "100 bytes"},
		"trickles 10 bytes every 20ms": {func(t *testing.T, hits *atomic.Int32) *httptest.Server {
			return paced(t, 10, 20*time.Millisecond, time.Minute, hits)
		}, `\d+ bytes`},
	} {
		t.Run(name, func(t *testing.T) {
			var hits atomic.Int32
			srv := c.source(t, &hits)
			f := newQuick(loopbackOnly, 1<<20, 10*time.Second, WithMinRate(MinRate{Bytes: 1 << 10, Window: 200 * time.Millisecond}))
			start := time.Now()
			err := f.ToFile(context.Background(), srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in"))
			took := time.Since(start)
			want := regexp.MustCompile(`: the source sent ` + c.sent + ` in 200ms, below the minimum of 1 KiB per 200ms$`)
			var slow *SlowError
			if err == nil || !want.MatchString(err.Error()) || !errors.As(err, &slow) {
				t.Fatalf("err = %v, want it to match %q", err, want)
			}
			var fe *Error
			if !errors.As(err, &fe) || fe.Attempts != 1 || hits.Load() != 1 {
				t.Errorf("%d requests, want the one attempt", hits.Load())
			}
			// One window of 200 ms, not the 10 s timeout.
			if took < 200*time.Millisecond || took > 2*time.Second {
				t.Errorf("failed after %s, want about 200ms", took)
			}
		})
	}
}

// A body that arrives in pieces is not cut while every window brings the minimum: twice it (16
// chunks of 128 bytes in each 400 ms window where 8 are the minimum), or just above it (20
// chunks of 64 bytes in each 1 s window where 16 are the minimum), for three windows. The
// margins let a busy machine's scheduler be late by 150 ms or more.
func TestKeepsABodyThatArrivesFasterThanTheMinimumRate(t *testing.T) {
	for name, c := range map[string]struct {
		size          int
		period, lasts time.Duration
		min           MinRate
	}{
		"twice the minimum":  {128, 25 * time.Millisecond, 1200 * time.Millisecond, MinRate{Bytes: 1 << 10, Window: 400 * time.Millisecond}},
		"just above minimum": {64, 50 * time.Millisecond, 3 * time.Second, MinRate{Bytes: 1 << 10, Window: time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			var hits atomic.Int32
			srv := paced(t, c.size, c.period, c.lasts, &hits)
			path := filepath.Join(t.TempDir(), "in")
			f := newQuick(loopbackOnly, 1<<20, 10*time.Second, WithMinRate(c.min))
			if err := f.ToFile(context.Background(), srv.URL+"/face.jpg", path); err != nil {
				t.Fatalf("err = %v, want the whole body", err)
			}
			want := c.size * int(c.lasts/c.period)
			if info, err := os.Stat(path); err != nil || info.Size() != int64(want) || hits.Load() != 1 {
				t.Errorf("file of %v bytes (%v) after %d requests, want %d bytes after one", info.Size(), err, hits.Load(), want)
			}
		})
	}
}

// Without WithMinRate a Fetcher holds bodies to DefaultMinRate; a MinRate of no bytes (as
// --fetch-min-rate-bytes=0 sets) checks none.
func TestTheMinimumRateDefaultsAndCanBeTurnedOff(t *testing.T) {
	if got := New(loopbackOnly, 1024, time.Second).minRate; got != DefaultMinRate {
		t.Errorf("New's MinRate = %+v, want DefaultMinRate %+v", got, DefaultMinRate)
	}
	var hits atomic.Int32
	srv := paced(t, 10, 20*time.Millisecond, 300*time.Millisecond, &hits)
	f := newQuick(loopbackOnly, 1024, 10*time.Second, WithMinRate(MinRate{Bytes: 0, Window: 50 * time.Millisecond}))
	if err := f.ToFile(context.Background(), srv.URL+"/face.jpg", filepath.Join(t.TempDir(), "in")); err != nil {
		t.Fatalf("err = %v with no minimum rate, want the slow body", err)
	}
}
