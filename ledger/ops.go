package ledger

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

type opKind int

const (
	opFreeze opKind = iota
	opSettle
	opForgetSettlement
	opTopUp
	opForgetTopUp
	opRelease
	opReserve
	opFreezeFrom
	opReleaseReservation
	opRecallReservations
)

// Op is one change to an account. Build it with Freeze, Settle, TopUp or the Forget helpers.
type Op struct {
	kind    opKind
	task    string
	amount  int64
	outcome videogenv1alpha1.SettlementOutcome
	topUp   string // PointTopUp name
	uid     string // PointTopUp UID
	// reservation names the Reservation of opReserve, opFreezeFrom and opReleaseReservation.
	reservation string
	need        int64 // opReserve: the least it must grant
	renew       bool  // opReserve: the reservation must exist already
}

// Freeze holds amount points for task, or refuses with *InsufficientBalanceError.
func Freeze(task string, amount int64) Op { return Op{kind: opFreeze, task: task, amount: amount} }

// Settle ends task's hold: Deducted moves it to spent, Refunded returns it to the balance.
func Settle(task string, outcome videogenv1alpha1.SettlementOutcome) Op {
	return Op{kind: opSettle, task: task, outcome: outcome}
}

// Release returns a hold to the balance without recording a settlement, for a hold whose task
// was never created (the REST apiserver froze, then failed to create the task). If the task
// does appear after all, its controller freezes again on acceptance.
func Release(task string) Op { return Op{kind: opRelease, task: task} }

// Reserve moves up to want points from the balance into the reservation name (made if
// renew is false and it does not exist) and renews it. It takes at most half the balance
// unless need is more, so other replicas still find points. It refuses with
// *InsufficientBalanceError if it cannot grant need, and with ErrReservationGone if renew is
// set and the reservation was released meanwhile. Result.Amount is the grant. Reserve is not
// keyed: a retried Reserve may grant twice, which only reserves more than its holder knows of
// until the reservation is released.
func Reserve(name string, want, need int64, renew bool) Op {
	return Op{kind: opReserve, reservation: name, amount: want, need: need, renew: renew}
}

// FreezeFrom makes task's hold of amount points out of the reservation it was admitted under.
// If the reservation is gone or holds less than amount, it freezes from the balance like Freeze
// (and can be refused the same ways). Like Freeze it is keyed by task: a repeat changes nothing.
func FreezeFrom(task string, amount int64, reservation string) Op {
	return Op{kind: opFreezeFrom, task: task, amount: amount, reservation: reservation}
}

// ReleaseReservation returns what is left in a reservation to the balance and removes it.
func ReleaseReservation(name string) Op {
	return Op{kind: opReleaseReservation, reservation: name}
}

// RecallReservations asks every replica holding a reservation on the account to release it
// (status.reservationsRecalledAt), for a replica that is short of points the others hold.
// A no-op when the account has no reservations.
func RecallReservations() Op { return Op{kind: opRecallReservations} }

// ForgetSettlement drops task's settlement record once the task's status shows its outcome.
func ForgetSettlement(task string) Op { return Op{kind: opForgetSettlement, task: task} }

// TopUp credits amount points for the PointTopUp name/uid, once.
func TopUp(name, uid string, amount int64) Op {
	return Op{kind: opTopUp, topUp: name, uid: uid, amount: amount}
}

// ForgetTopUp drops a top-up record once the PointTopUp's status shows it was applied.
func ForgetTopUp(uid string) Op { return Op{kind: opForgetTopUp, uid: uid} }

func (o Op) String() string {
	switch o.kind {
	case opFreeze:
		return fmt.Sprintf("freeze %d for task %q", o.amount, o.task)
	case opSettle:
		return fmt.Sprintf("settle task %q as %s", o.task, o.outcome)
	case opForgetSettlement:
		return fmt.Sprintf("forget settlement of task %q", o.task)
	case opRelease:
		return fmt.Sprintf("release the hold of task %q", o.task)
	case opReserve:
		return fmt.Sprintf("reserve up to %d (at least %d) in %q", o.amount, o.need, o.reservation)
	case opFreezeFrom:
		return fmt.Sprintf("freeze %d for task %q from reservation %q", o.amount, o.task, o.reservation)
	case opReleaseReservation:
		return fmt.Sprintf("release reservation %q", o.reservation)
	case opRecallReservations:
		return "recall reservations"
	case opTopUp:
		return fmt.Sprintf("top up %d from %q", o.amount, o.topUp)
	default:
		return fmt.Sprintf("forget top-up %s", o.uid)
	}
}

// Result is the answer to one Op.
type Result struct {
	// Changed is true when this op moved points or changed a record; false for a repeat.
	Changed bool
	// Amount is the hold, settlement or top-up amount the op found or made.
	Amount int64
	// Outcome of a Settle: the recorded one, which wins over the requested one on a repeat.
	Outcome videogenv1alpha1.SettlementOutcome
	// Balance is the account's available balance after the write that carried this op.
	Balance int64
	// BalanceAfter of a TopUp is the balance right after its own credit, as recorded.
	BalanceAfter int64
	// Err is why the op was refused; nothing changed for it.
	Err error
	// repeat marks a no-op decided by a record that is there (the task's hold or settlement,
	// the top-up's record): only that task's or top-up's own ops remove those, so a stale
	// copy of the account that shows one decides as well as a fresh read would.
	repeat bool
}

var (
	// ErrAccountNotFound: the namespace has no PointAccount.
	ErrAccountNotFound = errors.New("point account not found")
	// ErrAccountSuspended: the account accepts no new freezes.
	ErrAccountSuspended = errors.New("point account is suspended")
	// ErrNoHold: Settle found neither a hold nor a settlement for the task.
	ErrNoHold = errors.New("no hold or settlement for task")
	// ErrAlreadySettled: Freeze for a task whose settlement is still on record.
	ErrAlreadySettled = errors.New("task was already settled")
	// ErrInvalidAmount: a negative freeze or a non-positive top-up.
	ErrInvalidAmount = errors.New("invalid amount")
	// ErrTooManyHolds: the account already has the most unsettled tasks it may have.
	ErrTooManyHolds = errors.New("too many unsettled tasks")
	// ErrTooManyReservations: the account has as many reservations as it may have.
	ErrTooManyReservations = errors.New("too many reservations")
	// ErrReservationGone: a renewal found its reservation released (it expired).
	ErrReservationGone = errors.New("reservation was released")
	// ErrInvariant: a write would break credited = balance + frozen + spent or frozen = Σ holds.
	ErrInvariant = errors.New("ledger invariant violated")
)

// InsufficientBalanceError refuses a freeze larger than the available balance.
type InsufficientBalanceError struct {
	Account   string
	Task      string
	Required  int64
	Available int64
}

func (e *InsufficientBalanceError) Error() string {
	return fmt.Sprintf("account %q has %d points available, task %q needs %d", e.Account, e.Available, e.Task, e.Required)
}

// DefaultMaxHolds bounds the unsettled tasks of one account. Every compare-and-swap carries all
// of its holds and etcd refuses requests over 1.5 MiB; 20,000 holds are about 600 KiB of JSON.
const DefaultMaxHolds = 20000

// MaxReservations bounds an account's reservations (the CRD allows 64): each REST apiserver
// replica holds at most one per account at a time, and an expired one lingers for a while.
const MaxReservations = 32

// book is an account's status while a batch changes it, with the holds indexed by task; close
// writes the holds back into the status.
type book struct {
	st    *videogenv1alpha1.PointAccountStatus
	holds map[string]int64
}

func openBook(st *videogenv1alpha1.PointAccountStatus) *book {
	return &book{st: st, holds: st.HoldsByTask()}
}

func (b *book) close() { b.st.SetHolds(b.holds) }

// applyTo makes one op's change to b, or returns the reason it refused and leaves b as it was.
// A freeze is refused once b has maxHolds holds.
func applyTo(b *book, spec videogenv1alpha1.PointAccountSpec, account string, maxHolds int, op Op, now time.Time) Result {
	st := b.st
	at := metav1.NewTime(now)
	switch op.kind {
	case opFreeze:
		if r, decided := keyedFreeze(b, op); decided {
			return r
		}
		return freezeFromBalance(b, spec, account, maxHolds, op)

	case opFreezeFrom:
		if r, decided := keyedFreeze(b, op); decided {
			return r
		}
		i := findReservation(st, op.reservation)
		if i < 0 || st.Reservations[i].Amount < op.amount {
			return freezeFromBalance(b, spec, account, maxHolds, op)
		}
		// Admitted already, so neither suspension nor the hold limit applies: the points move
		// from one hold to another.
		st.Reservations[i].Amount -= op.amount
		st.Reserved -= op.amount
		b.holds[op.task] = op.amount
		return Result{Changed: true, Amount: op.amount}

	case opReserve:
		if op.amount < 0 || op.need < 0 || op.need > op.amount {
			return Result{Err: fmt.Errorf("%w: reserve %d, at least %d", ErrInvalidAmount, op.amount, op.need)}
		}
		if spec.Suspended {
			return Result{Err: fmt.Errorf("%w: %q", ErrAccountSuspended, account)}
		}
		i := findReservation(st, op.reservation)
		switch {
		case i < 0 && op.renew:
			return Result{Err: fmt.Errorf("%w: %q", ErrReservationGone, op.reservation)}
		case i < 0 && len(st.Reservations) >= MaxReservations:
			return Result{Err: fmt.Errorf("%w: account %q has %d", ErrTooManyReservations, account, len(st.Reservations))}
		case len(b.holds) >= maxHolds:
			// No reserving for tasks that could not hold their points.
			return Result{Err: fmt.Errorf("%w: account %q has %d tasks waiting to settle, the most it may have", ErrTooManyHolds, account, len(b.holds))}
		}
		// At most half the balance (unless need takes more), so that another replica always
		// finds points to reserve too.
		grant := min(op.amount, max(op.need, st.Balance/2))
		if op.need > st.Balance {
			return Result{Err: &InsufficientBalanceError{Account: account, Required: op.need, Available: st.Balance}}
		}
		if i < 0 {
			st.Reservations = append(st.Reservations, videogenv1alpha1.Reservation{Name: op.reservation})
			i = len(st.Reservations) - 1
		}
		st.Reservations[i].Amount += grant
		st.Reservations[i].RenewedAt = metav1.NewMicroTime(now)
		st.Balance -= grant
		st.Frozen += grant
		st.Reserved += grant
		return Result{Changed: true, Amount: grant}

	case opRecallReservations:
		if len(st.Reservations) == 0 {
			return Result{}
		}
		at := metav1.NewMicroTime(now)
		st.ReservationsRecalledAt = &at
		return Result{Changed: true}

	case opReleaseReservation:
		i := findReservation(st, op.reservation)
		if i < 0 {
			return Result{}
		}
		left := st.Reservations[i].Amount
		st.Reservations = append(st.Reservations[:i], st.Reservations[i+1:]...)
		st.Balance += left
		st.Frozen -= left
		st.Reserved -= left
		return Result{Changed: true, Amount: left}

	case opSettle:
		if i := findSettlement(st, op.task); i >= 0 {
			s := st.Settlements[i]
			return Result{Amount: s.Amount, Outcome: s.Outcome, repeat: true}
		}
		held, ok := b.holds[op.task]
		if !ok {
			return Result{Err: fmt.Errorf("%w %q", ErrNoHold, op.task)}
		}
		switch op.outcome {
		case videogenv1alpha1.SettlementDeducted:
			st.Spent += held
		case videogenv1alpha1.SettlementRefunded:
			st.Balance += held
		default:
			return Result{Err: fmt.Errorf("unknown settlement outcome %q", op.outcome)}
		}
		delete(b.holds, op.task)
		st.Frozen -= held
		st.Settlements = append(st.Settlements, videogenv1alpha1.Settlement{
			Task: op.task, Amount: held, Outcome: op.outcome, SettledAt: at,
		})
		return Result{Changed: true, Amount: held, Outcome: op.outcome}

	case opRelease:
		held, ok := b.holds[op.task]
		if !ok {
			return Result{}
		}
		delete(b.holds, op.task)
		st.Frozen -= held
		st.Balance += held
		return Result{Changed: true, Amount: held}

	case opForgetSettlement:
		i := findSettlement(st, op.task)
		if i < 0 {
			return Result{}
		}
		s := st.Settlements[i]
		st.Settlements = append(st.Settlements[:i], st.Settlements[i+1:]...)
		return Result{Changed: true, Amount: s.Amount, Outcome: s.Outcome}

	case opTopUp:
		if op.amount <= 0 {
			return Result{Err: fmt.Errorf("%w: top-up of %d", ErrInvalidAmount, op.amount)}
		}
		if i := findTopUp(st, op.uid); i >= 0 {
			return Result{Amount: st.TopUps[i].Amount, BalanceAfter: st.TopUps[i].BalanceAfter, repeat: true}
		}
		st.Balance += op.amount
		st.Credited += op.amount
		st.TopUps = append(st.TopUps, videogenv1alpha1.AppliedTopUp{
			Name: op.topUp, UID: op.uid, Amount: op.amount, BalanceAfter: st.Balance, AppliedAt: at,
		})
		return Result{Changed: true, Amount: op.amount, BalanceAfter: st.Balance}

	case opForgetTopUp:
		i := findTopUp(st, op.uid)
		if i < 0 {
			return Result{}
		}
		t := st.TopUps[i]
		st.TopUps = append(st.TopUps[:i], st.TopUps[i+1:]...)
		return Result{Changed: true, Amount: t.Amount}
	}
	return Result{Err: fmt.Errorf("unknown ledger operation %d", op.kind)}
}

// keyedFreeze decides a freeze of op.task without looking at any balance: a bad amount, a
// repeat (the task holds points already) or a task already settled. decided is false when the
// freeze is new.
func keyedFreeze(b *book, op Op) (r Result, decided bool) {
	if op.amount < 0 {
		return Result{Err: fmt.Errorf("%w: freeze of %d", ErrInvalidAmount, op.amount)}, true
	}
	if held, ok := b.holds[op.task]; ok {
		return Result{Amount: held, repeat: true}, true
	}
	if i := findSettlement(b.st, op.task); i >= 0 {
		return Result{Err: fmt.Errorf("%w: task %q was %s", ErrAlreadySettled, op.task, b.st.Settlements[i].Outcome)}, true
	}
	return Result{}, false
}

// freezeFromBalance holds op.amount points for op.task out of the balance: a new freeze
// (keyedFreeze decided nothing).
func freezeFromBalance(b *book, spec videogenv1alpha1.PointAccountSpec, account string, maxHolds int, op Op) Result {
	st := b.st
	if spec.Suspended {
		return Result{Err: fmt.Errorf("%w: %q", ErrAccountSuspended, account)}
	}
	if len(b.holds) >= maxHolds {
		return Result{Err: fmt.Errorf("%w: account %q has %d tasks waiting to settle, the most it may have", ErrTooManyHolds, account, len(b.holds))}
	}
	if op.amount > st.Balance {
		return Result{Err: &InsufficientBalanceError{Account: account, Task: op.task, Required: op.amount, Available: st.Balance}}
	}
	st.Balance -= op.amount
	st.Frozen += op.amount
	b.holds[op.task] = op.amount
	return Result{Changed: true, Amount: op.amount}
}

// Check verifies the ledger invariants on a status.
func Check(st *videogenv1alpha1.PointAccountStatus) error {
	var held int64
	seen := make(map[string]bool, st.HoldCount())
	for _, g := range st.Holds {
		if g.Amount < 0 {
			return fmt.Errorf("%w: holds of %d points are negative", ErrInvariant, g.Amount)
		}
		for _, task := range g.Tasks {
			if seen[task] {
				return fmt.Errorf("%w: task %q holds points twice", ErrInvariant, task)
			}
			seen[task] = true
		}
		held += g.Amount * int64(len(g.Tasks))
	}
	var reserved int64
	names := make(map[string]bool, len(st.Reservations))
	for _, r := range st.Reservations {
		if r.Amount < 0 || names[r.Name] {
			return fmt.Errorf("%w: reservation %q is negative or listed twice", ErrInvariant, r.Name)
		}
		names[r.Name] = true
		reserved += r.Amount
	}
	switch {
	case st.Reserved != reserved:
		return fmt.Errorf("%w: reserved %d != sum of reservations %d", ErrInvariant, st.Reserved, reserved)
	case st.Balance < 0 || st.Frozen < 0 || st.Spent < 0 || st.Credited < 0:
		return fmt.Errorf("%w: negative figure (balance %d, frozen %d, spent %d, credited %d)",
			ErrInvariant, st.Balance, st.Frozen, st.Spent, st.Credited)
	case st.Credited != st.Balance+st.Frozen+st.Spent:
		return fmt.Errorf("%w: credited %d != balance %d + frozen %d + spent %d",
			ErrInvariant, st.Credited, st.Balance, st.Frozen, st.Spent)
	case st.Frozen != held+reserved:
		return fmt.Errorf("%w: frozen %d != sum of holds %d + reserved %d", ErrInvariant, st.Frozen, held, reserved)
	}
	return nil
}

func findSettlement(st *videogenv1alpha1.PointAccountStatus, task string) int {
	for i := range st.Settlements {
		if st.Settlements[i].Task == task {
			return i
		}
	}
	return -1
}

func findReservation(st *videogenv1alpha1.PointAccountStatus, name string) int {
	for i := range st.Reservations {
		if st.Reservations[i].Name == name {
			return i
		}
	}
	return -1
}

func findTopUp(st *videogenv1alpha1.PointAccountStatus, uid string) int {
	for i := range st.TopUps {
		if st.TopUps[i].UID == uid {
			return i
		}
	}
	return -1
}

// Reservation is the reservation an op is about ("" for ops on tasks and top-ups).
func (o Op) Reservation() string { return o.reservation }

// Task is the task an op is about ("" for top-up ops).
func (o Op) Task() string { return o.task }

// Outcome is the settlement outcome of a Settle ("" for other ops).
func (o Op) Outcome() videogenv1alpha1.SettlementOutcome { return o.outcome }
