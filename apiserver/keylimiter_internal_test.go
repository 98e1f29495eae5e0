package apiserver

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The buckets of keys no longer used go (a full bucket answers as a new one would), and a key
// that has spent part of its burst keeps its bucket: it gets no fresh burst.
func TestTheKeyLimiterDropsFullBucketsOnly(t *testing.T) {
	now := time.Now()
	l := newKeyLimiter(rate.Every(time.Minute), 3)
	l.now = func() time.Time { return now }
	for range 3 {
		if _, ok := l.allow("busy"); !ok {
			t.Fatal("the busy key was refused within its burst")
		}
	}
	for i := range minPruneAt - 1 { // keys used once, then no more (revoked, an account deleted)
		l.allow(fmt.Sprintf("k%d", i))
	}
	now = now.Add(time.Minute) // the once-used buckets are full again; busy's has one token

	l.allow("newcomer") // the map is at minPruneAt: this prunes
	l.mu.Lock()
	kept := len(l.byKey)
	_, busyKept := l.byKey["busy"]
	l.mu.Unlock()
	if kept != 2 || !busyKept {
		t.Fatalf("after the prune %d buckets are kept (busy's: %v); want busy's and the newcomer's", kept, busyKept)
	}
	if _, ok := l.allow("busy"); !ok {
		t.Fatal("the busy key was refused the token a minute gave it")
	}
	if _, ok := l.allow("busy"); ok {
		t.Fatal("the busy key got a second token: its bucket was forgotten and a fresh burst given")
	}
}

// A bucket that is given an earlier time than its last one sets its clock back, and counts the
// time between the two again at the next request: the limiter must read the time and take the
// token in one step, under its lock, so that its buckets see times in order.
func TestTheKeyLimiterReadsTheTimeUnderItsLock(t *testing.T) {
	l := newKeyLimiter(rate.Every(time.Minute), 3)
	l.now = func() time.Time {
		if l.mu.TryLock() {
			l.mu.Unlock()
			t.Error("the time was read outside the lock: another request may reach the bucket first, with a later time")
		}
		return time.Now()
	}
	l.allow("k")
}
