package httpbackend

import (
	"errors"
	"math/rand/v2"
	"time"
)

// backoff is the wait before attempt+1: exponential from base, capped at limit, with "equal
// jitter" (half fixed, half random) so that many clients retrying at once spread out yet never
// retry immediately.
func backoff(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	return half + rand.N(half+1)
}

// retryWait is the wait before attempt+1 after err: the backend's Retry-After when it asked for
// one (a busy worker knows when it will have room), else backoff; never above limit, so that a
// stage's observation is not held up past the client's own bound.
func retryWait(err error, base, limit time.Duration, attempt int) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return min(se.RetryAfter, limit)
	}
	return backoff(base, limit, attempt)
}
