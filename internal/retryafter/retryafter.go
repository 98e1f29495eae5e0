// Package retryafter reads the Retry-After header of an HTTP answer (429, 503): how long the
// server asked its client to wait before trying again. The generation backends' client and the
// reference worker's input fetcher both honour it; it imports nothing beyond the standard
// library, so the worker, which must link nothing of Kubernetes, may share it.
package retryafter

import (
	"net/http"
	"strconv"
	"time"
)

// Parse is the wait h's Retry-After asks for, in seconds or as an HTTP date (counted from now);
// 0 if there is none, it is malformed, or the date has passed.
func Parse(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(secs)*time.Second, 0)
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0)
	}
	return 0
}
