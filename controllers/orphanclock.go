package controllers

import (
	"maps"
	"sync"
	"time"
)

// orphanClock remembers, per account, when each hold was first seen without its task, and
// which tasks this process saw deleted. Holds carry no timestamp (they are kept small); this
// clock starts after the freeze, so a restart can delay a release but never hasten one.
type orphanClock struct {
	mu       sync.Mutex
	accounts map[string]*orphanAccount
}

type orphanAccount struct {
	// missingSince: when a held task was first seen missing; the zero time for a task seen
	// deleted, whose hold needs no grace period.
	missingSince map[string]time.Time
	lastScan     time.Time
}

// orphanScan is one pass over an account's holds.
type orphanScan struct {
	clock  *orphanClock
	ns     string
	now    time.Time
	due    bool          // false: skip this pass
	wait   time.Duration // when not due: until the next pass (0: nothing to watch)
	before map[string]time.Time
	seen   map[string]time.Time
}

func (c *orphanClock) account(ns string) *orphanAccount {
	if c.accounts == nil {
		c.accounts = map[string]*orphanAccount{}
	}
	a := c.accounts[ns]
	if a == nil {
		a = &orphanAccount{missingSince: map[string]time.Time{}}
		c.accounts[ns] = a
	}
	return a
}

// deleted notes that a task was deleted before it settled.
func (c *orphanClock) deleted(ns, task string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.account(ns).missingSince[task] = time.Time{}
}

// begin starts a pass over an account's holds, unless the last one was less than every ago
// and no task has been seen deleted since.
func (c *orphanClock) begin(ns string, now time.Time, every time.Duration, anyHolds bool) *orphanScan {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.account(ns)
	deletion := false
	for _, at := range a.missingSince {
		deletion = deletion || at.IsZero()
	}
	if !a.lastScan.IsZero() && now.Sub(a.lastScan) < every && !deletion {
		s := &orphanScan{}
		if anyHolds || len(a.missingSince) > 0 {
			s.wait = a.lastScan.Add(every).Sub(now)
		}
		return s
	}
	a.lastScan = now
	return &orphanScan{clock: c, ns: ns, now: now, due: true, before: maps.Clone(a.missingSince), seen: map[string]time.Time{}}
}

// missing records that task is held but absent and returns since when it has been.
func (s *orphanScan) missing(task string) time.Time {
	first, ok := s.before[task]
	if !ok {
		first = s.now
	}
	s.seen[task] = first
	return first
}

// end keeps what this pass saw, and deletions noted while it ran.
func (s *orphanScan) end() {
	s.clock.mu.Lock()
	defer s.clock.mu.Unlock()
	a := s.clock.account(s.ns)
	for task, at := range a.missingSince {
		if _, known := s.before[task]; !known && at.IsZero() {
			s.seen[task] = at
		}
	}
	a.missingSince = s.seen
}
