package controllers

import (
	"testing"
	"time"
)

func TestOrphanClock(t *testing.T) {
	var c orphanClock
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	every := 30 * time.Second

	s := c.begin("acct", t0, every, true)
	if !s.due {
		t.Fatal("the first pass is not due")
	}
	if got := s.missing("vt-a"); !got.Equal(t0) {
		t.Fatalf("vt-a missing since %v, want now", got)
	}
	c.deleted("acct", "vt-b") // while the pass runs
	s.end()

	// A deletion makes the next pass due at once; the missing clock of vt-a keeps running.
	s = c.begin("acct", t0.Add(time.Second), every, true)
	if !s.due {
		t.Fatal("a pass after a deletion is not due")
	}
	if got := s.missing("vt-a"); !got.Equal(t0) {
		t.Fatalf("vt-a missing since %v, want %v", got, t0)
	}
	if got := s.missing("vt-b"); !got.IsZero() {
		t.Fatalf("deleted vt-b missing since %v, want the zero time (no grace)", got)
	}
	s.end()

	// vt-b's hold is gone (released); vt-a's task appeared: both are forgotten.
	s = c.begin("acct", t0.Add(2*time.Second), every, true)
	if !s.due {
		t.Fatal("a pass while a deletion is pending is not due")
	}
	s.end()

	// Without deletions, passes are at most every 30s.
	s = c.begin("acct", t0.Add(10*time.Second), every, true)
	if s.due || s.wait != 22*time.Second {
		t.Fatalf("pass 8s after the last: due %v, wait %s; want not due, 22s", s.due, s.wait)
	}
	if s := c.begin("acct", t0.Add(10*time.Second), every, false); s.due || s.wait != 0 {
		t.Fatalf("no holds: due %v, wait %s; want not due and nothing to watch", s.due, s.wait)
	}
	if s := c.begin("acct", t0.Add(33*time.Second), every, true); !s.due {
		t.Fatal("a pass 31s after the last is not due")
	}
}
