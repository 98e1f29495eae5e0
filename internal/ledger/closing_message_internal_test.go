package ledger

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A new user follows the messages: a deleted account that still has points says
// how to empty it with a command the CLI takes. Reachable: a PointTopUp applied to an account
// deleted while empty (before a credit to a closing account waited for the next
// one; its finalizer then kept it until it was emptied again), or the account's namespace deleted with points left (the policy lets
// the namespace controller through); `kubectl describe pointaccount` shows Ready=False,
// Closing. Before the fix its message said "Debit what is left with a PointTopUp of amount -50
// and a note (videogenctl topup)": the administrator runs `videogenctl topup acme -50 …`,
// which the CLI refuses (AMOUNT has no sign; a debit is --debit with --note), and in a
// namespace being deleted no debit can be created at all, which it did not say. The policy's
// own message already spells the command; the account's now does too, and says where the
// namespace case is explained.
func TestClosingAccountSaysTheDebitCommand(t *testing.T) {
	now := metav1.Now()
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName,
		DeletionTimestamp: &now}, Status: videogenv1alpha1.PointAccountStatus{Credited: 80, Spent: 20, Frozen: 10, Holds: 1, Balance: 50}}
	setConditions(acct)
	ready := meta.FindStatusCondition(acct.Status.Conditions, videogenv1alpha1.ConditionReady)
	if ready == nil || ready.Reason != videogenv1alpha1.ReasonClosing {
		t.Fatalf("Ready = %+v, want Closing", ready)
	}
	// Its tasks first (a task canceled refunds its hold into the balance: a debit made before
	// would leave that behind), then the debit of what is left.
	for _, want := range []string{"Cancel its tasks or wait for them to end, then debit what is left",
		"videogenctl topup acme AMOUNT --debit --reference REF --note WHY", "docs/ledger.md, Deleting things"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("the closing account's message with a hold is %q; want it to say %q", ready.Message, want)
		}
	}
	// No hold: the exact debit (AMOUNT without a sign).
	acct.Status = videogenv1alpha1.PointAccountStatus{Credited: 80, Spent: 30, Balance: 50}
	setConditions(acct)
	ready = meta.FindStatusCondition(acct.Status.Conditions, videogenv1alpha1.ConditionReady)
	for _, want := range []string{"videogenctl topup acme 50 --debit --reference REF --note WHY", "docs/ledger.md, Deleting things"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("the closing account's message is %q; want it to say %q", ready.Message, want)
		}
	}
	if strings.Contains(ready.Message, "Cancel its tasks") {
		t.Errorf("the closing account's message %q speaks of tasks it has none of", ready.Message)
	}
}
