package httpbackend

import (
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
