// Package fetcher downloads the media that callers hand the worker by URL. Those URLs come from
// users, so every connection goes through netguard: private destinations are refused after DNS
// resolution, on every redirect hop, and downloads are bounded in size and time.
package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/netguard"
)

// Fetcher downloads caller-supplied URLs safely.
type Fetcher struct {
	policy   netguard.Policy
	maxBytes int64
	timeout  time.Duration
	client   *http.Client
}

// maxRedirects is how many hops a download may follow.
const maxRedirects = 5

// New returns a Fetcher that refuses what policy refuses, stops after maxBytes and gives up
// after timeout per download.
func New(policy netguard.Policy, maxBytes int64, timeout time.Duration) *Fetcher {
	f := &Fetcher{policy: policy, maxBytes: maxBytes, timeout: timeout}
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

// ToFile downloads rawURL into path.
func (f *Fetcher) ToFile(ctx context.Context, rawURL, path string) error {
	u, err := f.policy.CheckURL(rawURL)
	if err != nil {
		return fmt.Errorf("refusing to fetch %s: %w", redact(rawURL), err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		// The message reaches the task's caller: no addresses of our network (Detail has them).
		return fmt.Errorf("fetching %s: %w", redact(rawURL), netguard.Explain(unwrapURLError(err)))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: HTTP %d", redact(rawURL), resp.StatusCode)
	}
	if resp.ContentLength > f.maxBytes {
		return fmt.Errorf("fetching %s: %d bytes is %w of %d bytes", redact(rawURL), resp.ContentLength, ErrTooLarge, f.maxBytes)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(resp.Body, f.maxBytes+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fetching %s: %w", redact(rawURL), netguard.Explain(err))
	}
	if n > f.maxBytes {
		return fmt.Errorf("fetching %s: %w of %d bytes", redact(rawURL), ErrTooLarge, f.maxBytes)
	}
	return nil
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
