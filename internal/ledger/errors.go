package ledger

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// errNotKept: this ledger does not keep the books (not elected, still building every
	// account's at Start, or deposed): the NotReadyElecting reason.
	errNotKept = fmt.Errorf("%w: this manager does not keep the books (not elected, or starting)", ErrNotReady)
	// errAccountLags: the elected ledger keeps the books but waits for the account's events (a
	// change the kube-apiserver shows and the informer has not brought, or the account's books
	// being rebuilt): the NotReadyAccount reason.
	errAccountLags = fmt.Errorf("%w: waiting for the account's latest change to reach the books", ErrNotReady)
	// errClusterFailed: a read of the kube-apiserver the answer needs failed: the
	// NotReadyBusy reason.
	errClusterFailed = fmt.Errorf("%w: the cluster did not answer a read", ErrNotReady)
	// errCreditsPending: a debit the balance does not cover waits for credits made before it.
	errCreditsPending = fmt.Errorf("%w: credits made before the debit are still to be applied", ErrNotReady)
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

// Why the ledger is not ready (NotReadyReason), as its not_ready answers say: the REST
// apiserver tells its clients what is true, not "electing" for one account's lag.
const (
	// NotReadyElecting: no manager keeps the books (none elected, or the elected one still
	// building them, or none listening): a failover or a start.
	NotReadyElecting = "electing"
	// NotReadyAccount: the elected manager keeps the books and waits for this account's latest
	// change (created, suspension lifted, rebuilt) to reach them.
	NotReadyAccount = "account"
	// NotReadyBusy: the kube-apiserver shed the ledger's request (a 429), or did not answer a
	// read the ledger needed.
	NotReadyBusy = "busy"
)

// NotReadyReason says why err (ErrNotReady, from the Ledger or its Client) is not ready: one of
// the NotReady reasons, NotReadyElecting if nothing more is known (an older manager's answer),
// or "" if err is not ErrNotReady.
func NotReadyReason(err error) string {
	var nr *notReadyError
	switch {
	case errors.As(err, &nr):
		if nr.reason == NotReadyAccount || nr.reason == NotReadyBusy {
			return nr.reason
		}
		return NotReadyElecting
	case errors.Is(err, errAccountLags):
		return NotReadyAccount
	case apierrors.IsTooManyRequests(err), errors.Is(err, errClusterFailed):
		return NotReadyBusy
	case errors.Is(err, ErrNotReady):
		return NotReadyElecting
	}
	return ""
}

// notReadyError is the ledger's not_ready answer as the Client read it.
type notReadyError struct{ reason, message string }

func (e *notReadyError) Error() string        { return ErrNotReady.Error() + ": " + e.message }
func (e *notReadyError) Is(target error) bool { return target == ErrNotReady }
