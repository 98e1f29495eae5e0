package controllers

import (
	"sync"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// reservationClock remembers, per account, when this process first saw each reservation's last
// renewal. A reservation expires TTL after that, on this process's clock alone: the holder's
// clock (in renewedAt) is only compared with itself, as in Kubernetes leader election, so
// clock skew between the apiserver and the manager cannot expire a live reservation early.
type reservationClock struct {
	mu   sync.Mutex
	seen map[string]map[string]renewalSeen // namespace → reservation → renewal
}

type renewalSeen struct {
	renewedAt time.Time // the holder's stamp, as an identity of the renewal
	since     time.Time // when this process first saw it
}

// expired returns the reservations of the account not renewed for ttl, and how long until the
// next one would expire (0: none left to watch).
func (c *reservationClock) expired(ns string, rs []videogenv1alpha1.Reservation, now time.Time, ttl time.Duration) ([]string, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]map[string]renewalSeen{}
	}
	before := c.seen[ns]
	if len(rs) == 0 {
		delete(c.seen, ns)
		return nil, 0
	}
	after := make(map[string]renewalSeen, len(rs))
	var out []string
	var next time.Duration
	for _, r := range rs {
		s, ok := before[r.Name]
		if !ok || !s.renewedAt.Equal(r.RenewedAt.Time) {
			s = renewalSeen{renewedAt: r.RenewedAt.Time, since: now}
		}
		after[r.Name] = s
		if left := s.since.Add(ttl).Sub(now); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		out = append(out, r.Name)
	}
	c.seen[ns] = after
	return out, next
}
