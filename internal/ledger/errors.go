package ledger

import (
	"errors"
	"fmt"
)

var (
	// ErrAccountNotFound: the namespace has no PointAccount.
	ErrAccountNotFound = errors.New("point account not found")
	// ErrAccountSuspended: the account takes no new tasks.
	ErrAccountSuspended = errors.New("point account is suspended")
	// ErrAccountClosing: the account is being deleted and takes no new tasks.
	ErrAccountClosing = errors.New("point account is being deleted")
	// ErrTaskExists: a task of that name exists (or is being created).
	ErrTaskExists = errors.New("a task of that name exists")
	// ErrNotReady: this ledger is not the elected one, or is still rebuilding its books; retry.
	ErrNotReady = errors.New("the ledger is not ready")
	// ErrNoAnswer: an attempt of the Client's call reached a manager and got no answer (it hung,
	// or died with the call open), and no later attempt got one within the Deadline: unlike
	// ErrNotReady (no manager listened or said it was ready, so nothing was created), a create
	// may have landed. A create is safe to retry with the task's name.
	ErrNoAnswer = errors.New("the points ledger did not answer in time")
	// errCreateInDoubt: the create reported an error that may follow its commit, and no read
	// has said whether it landed (its hold stays until one does): the endpoint answers it
	// in_doubt, and the Client returns ErrNoAnswer, as for a manager that did not answer.
	errCreateInDoubt = errors.New("the task may have been created: the kube-apiserver has not said whether the create landed")
	// ErrSettled: the task's points were already settled (or it never held any).
	ErrSettled = errors.New("the task's points are settled")
	// ErrFenced: another manager wrote its name into an account this ledger kept (its fence
	// write), so this one is no longer the authority; Start returns it, and the manager exits.
	ErrFenced = errors.New("another manager took over the points ledger")
)

// InsufficientBalanceError refuses a freeze (or a debit) the account's available points do not
// cover.
type InsufficientBalanceError struct {
	Required  int64
	Available int64
}

func (e *InsufficientBalanceError) Error() string {
	return fmt.Sprintf("insufficient balance: %d points required, %d available", e.Required, e.Available)
}
