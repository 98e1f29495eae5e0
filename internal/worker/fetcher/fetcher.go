// Package fetcher downloads the media that callers hand the worker by URL. Those URLs come from
// users, so every connection goes through netguard: private destinations are refused after DNS
// resolution, on every redirect hop, and downloads are bounded in size, time and the slowest rate
// their body may arrive at (see MinRate). A download that fails for a reason that may pass is
// tried again a few times (see defaultRetries).
package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/retryafter"
)

// Fetcher downloads caller-supplied URLs safely.
type Fetcher struct {
	policy   netguard.Policy
	maxBytes int64
	timeout  time.Duration
	minRate  MinRate
	client   *http.Client
	retries  backoff
	// sleep waits between attempts (tests replace it to see the waits without taking them).
	sleep func(ctx context.Context, d time.Duration) bool
}

// maxRedirects is how many hops a download may follow.
const maxRedirects = 5

// backoff is a schedule of attempts: attempts in all, the first wait first, each next wait
// factor times the one before, and each up to jitter of itself longer so that workers that
// failed together do not try again together.
type backoff struct {
	attempts int
	first    time.Duration
	factor   float64
	jitter   float64
}

// defaultRetries is how a download that failed for a reason that may pass (the host refused or
// reset the connection or did not answer in time; HTTP 408, 429 or 5xx) is tried again: 4
// attempts in all, 1 s, 3 s and 9 s apart (each up to a fifth longer, so about 15 s of waiting
// at most), or as long as a 429 or 503 asks in its Retry-After when that is longer, and never
// past the download's timeout or the end of the stage's context. Anything
// else (another 4xx, a destination netguard refuses, a download over the size limit) fails at
// once: trying again would not help. (A loop of its own, not apimachinery's wait: the worker
// links nothing of Kubernetes.)
var defaultRetries = backoff{attempts: 4, first: time.Second, factor: 3, jitter: 0.2}

// MinRate is the slowest a response body may arrive: at least Bytes in every Window, counted
// from when its headers arrived. A MinRate with no Bytes or no Window checks nothing.
type MinRate struct {
	Bytes  int64
	Window time.Duration
}

// DefaultMinRate is 32 KiB per 20 s (about 13 kbit/s): far below what any real media host or
// CDN sends, even over a poor mobile link, and a window long enough to ride out a lost packet's
// retransmits or a busy server's pause. A source that trickles its body is cut after 20 s
// instead of holding one of the worker's few slots for the whole fetch timeout.
var DefaultMinRate = MinRate{Bytes: 32 << 10, Window: 20 * time.Second}

func (r MinRate) enabled() bool { return r.Bytes > 0 && r.Window > 0 }

// Option configures a Fetcher that New makes.
type Option func(*Fetcher)

// WithMinRate sets the slowest body a download accepts (DefaultMinRate without it; a zero
// MinRate accepts any).
func WithMinRate(r MinRate) Option { return func(f *Fetcher) { f.minRate = r } }

// New returns a Fetcher that refuses what policy refuses, stops after maxBytes, cuts a body
// that arrives slower than its MinRate and gives up after timeout per download, its attempts
// and the waits between them included.
func New(policy netguard.Policy, maxBytes int64, timeout time.Duration, opts ...Option) *Fetcher {
	f := &Fetcher{policy: policy, maxBytes: maxBytes, timeout: timeout, minRate: DefaultMinRate, retries: defaultRetries, sleep: sleep}
	for _, opt := range opts {
		opt(f)
	}
	f.client = &http.Client{
		Transport: &http.Transport{
			// No proxy: a proxy would make the connection, and the dial check would see only it.
			Proxy:                 nil,
			DialContext:           policy.DialContext(10 * time.Second),
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			_, err := policy.CheckURL(req.URL.String())
			return err
		},
	}
	return f
}

// ErrTooLarge: the download exceeds the size limit.
var ErrTooLarge = errors.New("larger than the size limit")

// Error is a download that failed. Its message names the URL without its query (signed URLs
// carry credentials there) and says what went wrong without an address of our network; Err
// is that cause alone, for a message that must not name the URL.
type Error struct {
	// Op is "fetching", or "refusing to fetch" for a URL netguard refused before any attempt.
	Op  string
	URL string
	// Attempts is how many downloads were tried (0 when none was).
	Attempts int
	// RetryAfter, if set, is the wait the last answer asked for before another attempt, which
	// the download had no time left for.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	var notes []string
	if e.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("tried %d times", e.Attempts))
	}
	if e.RetryAfter > 0 {
		notes = append(notes, fmt.Sprintf("the host asked to be tried again in %s, after the time this download may take", e.RetryAfter))
	}
	msg := e.Op + " " + e.URL + ": " + e.Err.Error()
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// SlowError: an answer's body arrived slower than the Fetcher's MinRate.
type SlowError struct {
	// Got is what arrived in the window that was too slow.
	Got int64
	Min MinRate
}

func (e *SlowError) Error() string {
	return fmt.Sprintf("the source sent %s in %s, below the minimum of %s per %s",
		bytesOf(e.Got), e.Min.Window, sizeOf(e.Min.Bytes), e.Min.Window)
}

// bytesOf is "1 byte" or "n bytes".
func bytesOf(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// sizeOf is n in MiB or KiB when it is a whole number of them, else in bytes.
func sizeOf(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return bytesOf(n)
}

// StatusError is an answer other than 200 OK.
type StatusError struct {
	Code int
	// RetryAfter is the wait a 429 or 503 asked for in its Retry-After header (0: none).
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d", e.Code) }

// localError is a failure of this machine (writing the file), which says nothing of the URL.
type localError struct{ error }

// ToFile downloads rawURL into path, trying again while the failure may pass (see defaultRetries).
func (f *Fetcher) ToFile(ctx context.Context, rawURL, path string) error {
	u, err := f.policy.CheckURL(rawURL)
	if err != nil {
		return &Error{Op: "refusing to fetch", URL: redact(rawURL), Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var (
		last     error
		attempts int
		tooLong  time.Duration // a Retry-After there was no time left to wait
	)
	for wait := f.retries.first; ; wait = time.Duration(float64(wait) * f.retries.factor) {
		attempts++
		last = f.once(ctx, u, path)
		if last == nil {
			return nil
		}
		if attempts >= f.retries.attempts || ctx.Err() != nil || !transient(last) {
			break
		}
		d := f.retries.jittered(wait)
		var status *StatusError
		asked := errors.As(last, &status) && status.RetryAfter > d
		if asked {
			// The host knows better than our schedule when it will have room.
			d = status.RetryAfter
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			// No attempt could follow: say now what failed.
			if asked {
				tooLong = d
			}
			break
		}
		if !f.sleep(ctx, d) {
			break
		}
	}
	var local localError
	if errors.As(last, &local) {
		return local.error
	}
	// The last attempt's failure is the news, also when ctx ended before the next one.
	return &Error{Op: "fetching", URL: redact(rawURL), Attempts: attempts, RetryAfter: tooLong, Err: last}
}

// jittered is d made up to b.jitter of itself longer.
func (b backoff) jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Float64()*b.jitter*float64(d))
}

// sleep waits d and reports true, or reports false if ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// once is one attempt; its error says what failed without the URL, which ToFile adds.
func (f *Fetcher) once(ctx context.Context, u *url.URL, path string) error {
	// The watchdog ends the attempt through ctx, which tells why.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		// The message reaches the task's caller: no addresses of our network (Detail has them).
		return netguard.Explain(unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		se := &StatusError{Code: resp.StatusCode}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			se.RetryAfter = retryafter.Parse(resp.Header, time.Now())
		}
		return se
	}
	if resp.ContentLength > f.maxBytes {
		return fmt.Errorf("%d bytes is %w of %d bytes", resp.ContentLength, ErrTooLarge, f.maxBytes)
	}
	out, err := os.Create(path)
	if err != nil {
		return localError{err}
	}
	body, stop := io.Reader(resp.Body), func() {}
	if f.minRate.enabled() {
		w := watch(resp.Body, f.minRate, cancel)
		body, stop = w, w.stop
	}
	n, err := io.Copy(out, io.LimitReader(body, f.maxBytes+1))
	// Stop watching first: a window that ends after the body did must not become the error.
	stop()
	if cerr := out.Close(); cerr != nil && err == nil {
		return localError{cerr}
	}
	if err != nil {
		var slow *SlowError
		if errors.As(context.Cause(ctx), &slow) {
			return slow
		}
		return netguard.Explain(err)
	}
	if n > f.maxBytes {
		return fmt.Errorf("%w of %d bytes", ErrTooLarge, f.maxBytes)
	}
	return nil
}

// watchdog reads a body and, at the end of every window, cancels the attempt with a SlowError
// if less than its rate arrived in that window.
type watchdog struct {
	body   io.Reader
	rate   MinRate
	cancel context.CancelCauseFunc
	got    atomic.Int64 // bytes read in the current window

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func watch(body io.Reader, rate MinRate, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{body: body, rate: rate, cancel: cancel}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(rate.Window, w.check)
	return w
}

func (w *watchdog) Read(p []byte) (int, error) {
	n, err := w.body.Read(p)
	w.got.Add(int64(n))
	return n, err
}

// check ends a window: too little cancels the attempt, enough starts the next window.
func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if got := w.got.Swap(0); got < w.rate.Bytes {
		w.stopped = true
		w.cancel(&SlowError{Got: got, Min: w.rate})
		return
	}
	w.timer.Reset(w.rate.Window)
}

// stop ends the watch: no window is checked after it returns.
func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// transient reports whether a failed attempt may succeed if tried again shortly: the host
// refused, reset or dropped the connection, nothing answered in time, or the answer was 408
// Request Timeout, 429 Too Many Requests or a 5xx. A body slower than the MinRate is not: a
// host that trickles on purpose trickles again, and each attempt would hold the slot a window
// longer.
func transient(err error) bool {
	var status *StatusError
	if errors.As(err, &status) {
		return status.Code == http.StatusRequestTimeout || status.Code == http.StatusTooManyRequests || status.Code >= 500
	}
	var slow *SlowError
	if errors.Is(err, netguard.ErrForbiddenDestination) || errors.Is(err, ErrTooLarge) || errors.As(err, &slow) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	for _, passing := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, passing) {
			return true
		}
	}
	return false
}

// unwrapURLError drops url.Error's "Get \"…\":" prefix, which would repeat the full URL.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
