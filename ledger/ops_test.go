package ledger

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func funded(balance int64) videogenv1alpha1.PointAccountStatus {
	return videogenv1alpha1.PointAccountStatus{Balance: balance, Credited: balance}
}

// apply makes one op's change to st, as a batch of one does.
func apply(st *videogenv1alpha1.PointAccountStatus, spec videogenv1alpha1.PointAccountSpec, account string, maxHolds int, op Op, now time.Time) Result {
	b := openBook(st)
	r := applyTo(b, spec, account, maxHolds, op, now)
	b.close()
	return r
}

func mustApply(t *testing.T, st *videogenv1alpha1.PointAccountStatus, op Op) Result {
	t.Helper()
	r := apply(st, videogenv1alpha1.PointAccountSpec{}, "acme", DefaultMaxHolds, op, t0)
	if err := Check(st); err != nil {
		t.Fatalf("after %v: %v", op, err)
	}
	return r
}

func TestFreezeHoldsPointsOnce(t *testing.T) {
	st := funded(100)
	if r := mustApply(t, &st, Freeze("a", 30)); !r.Changed || r.Err != nil {
		t.Fatalf("first freeze = %+v", r)
	}
	if r := mustApply(t, &st, Freeze("a", 30)); r.Changed || r.Err != nil || r.Amount != 30 {
		t.Fatalf("repeated freeze = %+v, want unchanged with amount 30", r)
	}
	if st.Balance != 70 || st.Frozen != 30 || st.HoldCount() != 1 {
		t.Fatalf("status = %+v", st)
	}
}

func TestFreezeRefusesMoreThanTheBalance(t *testing.T) {
	st := funded(20)
	r := mustApply(t, &st, Freeze("a", 21))
	var ib *InsufficientBalanceError
	if !errors.As(r.Err, &ib) || ib.Available != 20 || ib.Required != 21 {
		t.Fatalf("freeze = %+v, want InsufficientBalanceError{Available: 20, Required: 21}", r)
	}
	if st.Balance != 20 || st.Frozen != 0 || st.HoldCount() != 0 {
		t.Fatalf("refused freeze changed the status: %+v", st)
	}
	if r := mustApply(t, &st, Freeze("b", 20)); r.Err != nil {
		t.Fatalf("freeze of the exact balance refused: %v", r.Err)
	}
}

func TestFreezeRefusedOnceTheAccountHasMaxHolds(t *testing.T) {
	st := funded(100)
	for _, task := range []string{"a", "b"} {
		if r := apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", 2, Freeze(task, 1), t0); r.Err != nil {
			t.Fatalf("freeze %s: %v", task, r.Err)
		}
	}
	before := *st.DeepCopy()
	if r := apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", 2, Freeze("c", 1), t0); !errors.Is(r.Err, ErrTooManyHolds) {
		t.Fatalf("third freeze = %+v, want ErrTooManyHolds", r)
	}
	if !reflect.DeepEqual(st, before) {
		t.Fatalf("refused freeze changed the status: %+v", st)
	}
	// A repeat of an existing hold still answers, and a settle makes room.
	if r := apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", 2, Freeze("a", 1), t0); r.Err != nil || r.Changed {
		t.Fatalf("repeated freeze = %+v", r)
	}
	apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", 2, Settle("a", videogenv1alpha1.SettlementDeducted), t0)
	if r := apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", 2, Freeze("c", 1), t0); r.Err != nil {
		t.Fatalf("freeze after a settle: %v", r.Err)
	}
}

func TestFreezeRefusedOnSuspendedAccount(t *testing.T) {
	st := funded(20)
	r := apply(&st, videogenv1alpha1.PointAccountSpec{Suspended: true}, "acme", DefaultMaxHolds, Freeze("a", 1), t0)
	if !errors.Is(r.Err, ErrAccountSuspended) || st.Balance != 20 {
		t.Fatalf("freeze on suspended account = %+v, status %+v", r, st)
	}
}

func TestSettleDeductsOrRefundsExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		outcome        videogenv1alpha1.SettlementOutcome
		balance, spent int64
	}{
		{videogenv1alpha1.SettlementDeducted, 60, 40},
		{videogenv1alpha1.SettlementRefunded, 100, 0},
	} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			st := funded(100)
			mustApply(t, &st, Freeze("a", 40))
			if r := mustApply(t, &st, Settle("a", tc.outcome)); !r.Changed || r.Outcome != tc.outcome {
				t.Fatalf("settle = %+v", r)
			}
			// A retry, even asking for the other outcome, returns the first one and moves nothing.
			other := videogenv1alpha1.SettlementRefunded
			if tc.outcome == other {
				other = videogenv1alpha1.SettlementDeducted
			}
			if r := mustApply(t, &st, Settle("a", other)); r.Changed || r.Outcome != tc.outcome {
				t.Fatalf("repeated settle = %+v, want the recorded outcome %s", r, tc.outcome)
			}
			if st.Balance != tc.balance || st.Spent != tc.spent || st.Frozen != 0 {
				t.Fatalf("status = %+v", st)
			}
			// The settled task cannot be frozen again while its settlement is on record.
			if r := mustApply(t, &st, Freeze("a", 40)); !errors.Is(r.Err, ErrAlreadySettled) {
				t.Fatalf("freeze after settle = %+v, want ErrAlreadySettled", r)
			}
			if r := mustApply(t, &st, ForgetSettlement("a")); !r.Changed || len(st.Settlements) != 0 {
				t.Fatalf("forget = %+v, settlements %v", r, st.Settlements)
			}
		})
	}
}

func TestReleaseReturnsAHoldWithoutARecord(t *testing.T) {
	st := funded(50)
	mustApply(t, &st, Freeze("a", 20))
	if r := mustApply(t, &st, Release("a")); !r.Changed || r.Amount != 20 {
		t.Fatalf("release = %+v", r)
	}
	if st.Balance != 50 || st.Frozen != 0 || len(st.Settlements) != 0 {
		t.Fatalf("status = %+v", st)
	}
	// The task name is free again: a retry with the same idempotency key can freeze.
	if r := mustApply(t, &st, Freeze("a", 20)); r.Err != nil {
		t.Fatalf("freeze after release: %v", r.Err)
	}
	if r := mustApply(t, &st, Release("missing")); r.Changed {
		t.Fatalf("release of a missing hold changed the account")
	}
}

func TestSettleWithoutHold(t *testing.T) {
	st := funded(10)
	if r := mustApply(t, &st, Settle("ghost", videogenv1alpha1.SettlementDeducted)); !errors.Is(r.Err, ErrNoHold) {
		t.Fatalf("settle = %+v, want ErrNoHold", r)
	}
}

func TestSettleRefusesUnknownOutcomeAndChangesNothing(t *testing.T) {
	st := funded(10)
	mustApply(t, &st, Freeze("a", 4))
	mustApply(t, &st, Freeze("b", 3))
	before := *st.DeepCopy()
	if r := mustApply(t, &st, Settle("a", "Lost")); r.Err == nil {
		t.Fatal("settle with unknown outcome succeeded")
	}
	if st.Frozen != before.Frozen || !reflect.DeepEqual(st.Holds, before.Holds) {
		t.Fatalf("status changed: %+v", st)
	}
}

func TestTopUpCreditsOnce(t *testing.T) {
	st := funded(0)
	if r := mustApply(t, &st, TopUp("inv-1", "uid-1", 500)); !r.Changed {
		t.Fatalf("top-up = %+v", r)
	}
	if r := mustApply(t, &st, TopUp("inv-1", "uid-1", 500)); r.Changed {
		t.Fatalf("repeated top-up changed the account: %+v", r)
	}
	if st.Balance != 500 || st.Credited != 500 {
		t.Fatalf("status = %+v", st)
	}
	if r := mustApply(t, &st, TopUp("bad", "uid-2", 0)); !errors.Is(r.Err, ErrInvalidAmount) {
		t.Fatalf("zero top-up = %+v", r)
	}
	mustApply(t, &st, ForgetTopUp("uid-1"))
	if len(st.TopUps) != 0 || st.Balance != 500 {
		t.Fatalf("forget changed figures: %+v", st)
	}
}

func TestCheckFindsBrokenInvariants(t *testing.T) {
	broken := []videogenv1alpha1.PointAccountStatus{
		{Balance: 10, Credited: 11},
		{Balance: 5, Frozen: 5, Credited: 10},
		{Balance: -1, Spent: 1},
		{Frozen: 3, Credited: 3, Holds: []videogenv1alpha1.HoldGroup{{Amount: 2, Tasks: []string{"a"}}}},
		{Frozen: 0, Balance: 3, Credited: 3, Holds: []videogenv1alpha1.HoldGroup{{Amount: -2, Tasks: []string{"b"}}, {Amount: 2, Tasks: []string{"a"}}}},
		{Frozen: 4, Balance: 0, Credited: 4, Holds: []videogenv1alpha1.HoldGroup{{Amount: 2, Tasks: []string{"a"}}, {Amount: 2, Tasks: []string{"a"}}}},
	}
	for i, st := range broken {
		if err := Check(&st); !errors.Is(err, ErrInvariant) {
			t.Errorf("case %d: Check(%+v) = %v, want ErrInvariant", i, st, err)
		}
	}
}

func FuzzApplyKeepsInvariant(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 0, 1})
	f.Add([]byte{0x43, 0x35, 0x46, 0x0e, 0x01, 0x87, 0x07, 0x16}) // top up, reserve, freeze from, settle, release
	f.Fuzz(func(t *testing.T, script []byte) {
		st := funded(0)
		tasks := []string{"a", "b", "c"}
		for i, b := range script {
			task := tasks[int(b>>3)%len(tasks)]
			amount := int64(b%16) - 2
			var op Op
			rsv := []string{"r1", "r2"}[int(b>>6)%2]
			switch b % 8 {
			case 0:
				op = Freeze(task, amount)
			case 1:
				op = Settle(task, videogenv1alpha1.SettlementDeducted)
			case 2:
				op = Settle(task, videogenv1alpha1.SettlementRefunded)
			case 3:
				op = TopUp("t", string(rune('A'+i%7)), amount)
			case 4:
				if b&0x80 != 0 {
					op = Release(task)
				} else {
					op = ForgetSettlement(task)
				}
			case 5:
				op = Reserve(rsv, amount, max(amount/2, 0), b&0x20 != 0)
			case 6:
				op = FreezeFrom(task, amount, rsv)
			case 7:
				if b&0x80 != 0 {
					op = ReleaseReservation(rsv)
				} else {
					op = RecallReservations()
				}
			}
			before := *st.DeepCopy()
			r := apply(&st, videogenv1alpha1.PointAccountSpec{}, "acme", DefaultMaxHolds, op, t0)
			if err := Check(&st); err != nil {
				t.Fatalf("after %v: %v", op, err)
			}
			if r.Err != nil && (st.Balance != before.Balance || st.Frozen != before.Frozen || st.Spent != before.Spent ||
				st.Credited != before.Credited || st.Reserved != before.Reserved) {
				t.Fatalf("refused %v changed figures", op)
			}
		}
	})
}

func TestRefusedTellsADecisionFromAFailedWrite(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"short balance":          {&InsufficientBalanceError{Account: "a", Required: 10, Available: 5}, true},
		"suspended":              {fmt.Errorf("%w: %q", ErrAccountSuspended, "a"), true},
		"too many reservations":  {fmt.Errorf("%w: 32", ErrTooManyReservations), true},
		"no account":             {&callError{fmt.Errorf("%w: no PointAccount", ErrAccountNotFound)}, true},
		"the update failed":      {&callError{errors.New("ledger: writing account: connection reset")}, false},
		"contended too long":     {&callError{fmt.Errorf("stayed contended: %w", context.DeadlineExceeded)}, false},
		"caller stopped waiting": {fmt.Errorf("ledger: waiting for account: %w", context.Canceled), false},
		"no error":               {nil, false},
	}
	for name, c := range cases {
		if got := Refused(c.err); got != c.want {
			t.Errorf("%s: Refused(%v) = %v, want %v", name, c.err, got, c.want)
		}
	}
}
