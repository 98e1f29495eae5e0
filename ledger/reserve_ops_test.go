package ledger

import (
	"errors"
	"reflect"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func TestReserveMovesBalanceIntoAReservation(t *testing.T) {
	st := funded(200)
	r := mustApply(t, &st, Reserve("r1", 80, 10, false))
	if !r.Changed || r.Amount != 80 {
		t.Fatalf("reserve = %+v, want a grant of 80", r)
	}
	if st.Balance != 120 || st.Frozen != 80 || st.Reserved != 80 || len(st.Reservations) != 1 || st.Reservations[0].Amount != 80 {
		t.Fatalf("status = %+v", st)
	}
	// At most half the balance is granted, and a renewal stamps the time again.
	r = mustApply(t, &st, Reserve("r1", 100, 0, true))
	if r.Amount != 60 || st.Balance != 60 || st.Reservations[0].Amount != 140 || !st.Reservations[0].RenewedAt.Time.Equal(t0) {
		t.Fatalf("second reserve = %+v, status %+v", r, st)
	}
	// Unless need takes more: then up to the whole balance.
	r = mustApply(t, &st, Reserve("r2", 60, 60, false))
	if r.Amount != 60 || st.Balance != 0 {
		t.Fatalf("reserve needing the whole balance = %+v, status %+v", r, st)
	}
}

func TestReserveRefusals(t *testing.T) {
	st := funded(30)
	before := *st.DeepCopy()
	var ib *InsufficientBalanceError
	if r := mustApply(t, &st, Reserve("r1", 100, 31, false)); !errors.As(r.Err, &ib) || ib.Available != 30 || ib.Required != 31 {
		t.Fatalf("reserve beyond the balance = %+v", r)
	}
	if r := mustApply(t, &st, Reserve("r1", 10, 0, true)); !errors.Is(r.Err, ErrReservationGone) {
		t.Fatalf("renewal of a missing reservation = %+v, want ErrReservationGone", r)
	}
	if r := mustApply(t, &st, Reserve("r1", 5, 10, false)); !errors.Is(r.Err, ErrInvalidAmount) {
		t.Fatalf("need above want = %+v, want ErrInvalidAmount", r)
	}
	if r := apply(&st, videogenv1alpha1.PointAccountSpec{Suspended: true}, "acme", DefaultMaxHolds, Reserve("r1", 10, 10, false), t0); !errors.Is(r.Err, ErrAccountSuspended) {
		t.Fatalf("reserve on a suspended account = %+v", r)
	}
	if !reflect.DeepEqual(st, before) {
		t.Fatalf("refused reserves changed the status: %+v", st)
	}
	full := funded(1000)
	for i := range MaxReservations {
		mustApply(t, &full, Reserve(string(rune('a'+i)), 1, 1, false))
	}
	if r := mustApply(t, &full, Reserve("one-more", 1, 1, false)); !errors.Is(r.Err, ErrTooManyReservations) {
		t.Fatalf("reservation %d = %+v, want ErrTooManyReservations", MaxReservations+1, r)
	}
}

func TestFreezeFromMovesAReservedPriceIntoTheTasksHoldOnce(t *testing.T) {
	st := funded(100)
	mustApply(t, &st, Reserve("r1", 50, 10, false))
	if r := mustApply(t, &st, FreezeFrom("t1", 10, "r1")); !r.Changed || r.Amount != 10 {
		t.Fatalf("freeze from = %+v", r)
	}
	if st.Balance != 50 || st.Frozen != 50 || st.Reserved != 40 || st.HoldsByTask()["t1"] != 10 {
		t.Fatalf("status = %+v", st)
	}
	if r := mustApply(t, &st, FreezeFrom("t1", 10, "r1")); r.Changed || r.Amount != 10 || st.Reserved != 40 {
		t.Fatalf("repeat = %+v, reserved %d", r, st.Reserved)
	}
	// A suspended account still converts what it admitted.
	if r := apply(&st, videogenv1alpha1.PointAccountSpec{Suspended: true}, "acme", DefaultMaxHolds, FreezeFrom("t2", 10, "r1"), t0); r.Err != nil || !r.Changed {
		t.Fatalf("freeze from on a suspended account = %+v", r)
	}
	if err := Check(&st); err != nil {
		t.Fatal(err)
	}
	// Settling and forgetting leaves no way to freeze it again while the record lasts.
	mustApply(t, &st, Settle("t1", videogenv1alpha1.SettlementDeducted))
	if r := mustApply(t, &st, FreezeFrom("t1", 10, "r1")); !errors.Is(r.Err, ErrAlreadySettled) {
		t.Fatalf("freeze from after settle = %+v", r)
	}
}

func TestFreezeFromFallsBackToTheBalance(t *testing.T) {
	st := funded(25)
	mustApply(t, &st, Reserve("r1", 5, 5, false))
	// r1 holds 5, the task costs 10: taken from the balance (20) instead.
	if r := mustApply(t, &st, FreezeFrom("t1", 10, "r1")); !r.Changed || st.Balance != 10 || st.Reserved != 5 {
		t.Fatalf("fallback = %+v, status %+v", r, st)
	}
	// A gone reservation also falls back, and refuses like Freeze when the balance is short.
	var ib *InsufficientBalanceError
	if r := mustApply(t, &st, FreezeFrom("t2", 11, "gone")); !errors.As(r.Err, &ib) || ib.Available != 10 {
		t.Fatalf("fallback beyond the balance = %+v", r)
	}
}

func TestReleaseReservationReturnsWhatIsLeft(t *testing.T) {
	st := funded(200)
	mustApply(t, &st, Reserve("r1", 60, 0, false))
	mustApply(t, &st, FreezeFrom("t1", 10, "r1"))
	r := mustApply(t, &st, ReleaseReservation("r1"))
	if !r.Changed || r.Amount != 50 {
		t.Fatalf("release = %+v", r)
	}
	if st.Balance != 190 || st.Frozen != 10 || st.Reserved != 0 || len(st.Reservations) != 0 {
		t.Fatalf("status = %+v", st)
	}
	if r := mustApply(t, &st, ReleaseReservation("r1")); r.Changed {
		t.Fatalf("second release = %+v", r)
	}
}

func TestCheckCountsReservationsAsHolds(t *testing.T) {
	st := funded(100)
	mustApply(t, &st, Reserve("r1", 60, 0, false))
	bad := st.DeepCopy()
	bad.Reserved = 0
	if err := Check(bad); !errors.Is(err, ErrInvariant) {
		t.Fatalf("Check with reserved != Σ reservations = %v", err)
	}
	bad = st.DeepCopy()
	bad.Reservations = append(bad.Reservations, bad.Reservations[0])
	if err := Check(bad); !errors.Is(err, ErrInvariant) {
		t.Fatalf("Check with a reservation listed twice = %v", err)
	}
}

func TestRecallReservationsStampsOnlyWhenThereAreAny(t *testing.T) {
	st := funded(100)
	if r := mustApply(t, &st, RecallReservations()); r.Changed || st.ReservationsRecalledAt != nil {
		t.Fatalf("recall without reservations = %+v, %v", r, st.ReservationsRecalledAt)
	}
	mustApply(t, &st, Reserve("r1", 40, 0, false))
	if r := mustApply(t, &st, RecallReservations()); !r.Changed || st.ReservationsRecalledAt == nil || !st.ReservationsRecalledAt.Time.Equal(t0) {
		t.Fatalf("recall = %+v, stamp %v", r, st.ReservationsRecalledAt)
	}
	if st.Balance != 60 || st.Reserved != 40 {
		t.Fatalf("a recall moved points: %+v", st)
	}
}
