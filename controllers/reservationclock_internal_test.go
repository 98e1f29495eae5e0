package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func TestReservationClockCountsFromTheFirstSightingOfEachRenewal(t *testing.T) {
	var c reservationClock
	t0 := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	ttl := 30 * time.Second
	// Stamped an hour "ago" by a holder whose clock is off: still not expired, the TTL counts
	// from when this process first saw the stamp.
	r := videogenv1alpha1.Reservation{Name: "r-1", Amount: 50, RenewedAt: metav1.NewMicroTime(t0.Add(-time.Hour))}
	rs := []videogenv1alpha1.Reservation{r}
	if out, next := c.expired("acme", rs, t0, ttl); len(out) != 0 || next != ttl {
		t.Fatalf("first sighting: expired %v, next %v", out, next)
	}
	if out, next := c.expired("acme", rs, t0.Add(20*time.Second), ttl); len(out) != 0 || next != 10*time.Second {
		t.Fatalf("after 20s: expired %v, next %v", out, next)
	}
	// A renewal restarts the count.
	rs[0].RenewedAt = metav1.NewMicroTime(t0.Add(-time.Hour + time.Second))
	if out, _ := c.expired("acme", rs, t0.Add(25*time.Second), ttl); len(out) != 0 {
		t.Fatalf("renewed: expired %v", out)
	}
	if out, _ := c.expired("acme", rs, t0.Add(54*time.Second), ttl); len(out) != 0 {
		t.Fatalf("29s after the renewal: expired %v", out)
	}
	if out, _ := c.expired("acme", rs, t0.Add(55*time.Second), ttl); len(out) != 1 || out[0] != "r-1" {
		t.Fatalf("30s after the renewal: expired %v, want [r-1]", out)
	}
	// Gone from the account: forgotten.
	if out, next := c.expired("acme", nil, t0.Add(56*time.Second), ttl); out != nil || next != 0 || len(c.seen) != 0 {
		t.Fatalf("no reservations: %v %v %v", out, next, c.seen)
	}
}

func TestAnExpiredReservationWaitsForTasksStillToTakeTheirPoints(t *testing.T) {
	task := func(name string, phase videogenv1alpha1.TaskPhase, charge videogenv1alpha1.ChargeState) videogenv1alpha1.VideoTask {
		vt := videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: name}}
		vt.Status.Phase, vt.Status.Charge = phase, charge
		return vt
	}
	holds := map[string]int64{"converted": 10}
	for _, c := range []struct {
		tasks []videogenv1alpha1.VideoTask
		want  bool
	}{
		{nil, false},
		{[]videogenv1alpha1.VideoTask{task("converted", videogenv1alpha1.TaskPending, "")}, false},
		{[]videogenv1alpha1.VideoTask{task("charged", videogenv1alpha1.TaskRunning, videogenv1alpha1.ChargeFrozen)}, false},
		{[]videogenv1alpha1.VideoTask{task("rejected", videogenv1alpha1.TaskFailed, "")}, false},
		{[]videogenv1alpha1.VideoTask{task("converted", videogenv1alpha1.TaskPending, ""), task("new", "", "")}, true},
	} {
		if got := anyWaitingForHold(c.tasks, holds); got != c.want {
			t.Errorf("anyWaitingForHold(%v) = %v, want %v", c.tasks, got, c.want)
		}
	}
}
