package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PointAccountName is the only allowed name of a PointAccount: a namespace is one account.
const PointAccountName = "default"

// FinalizerLedger keeps a PointAccount until the ledger has closed its books: no points left, no
// task holding points, nothing in the journal. On a PointTopUp it is put before the ledger queues
// its credit and keeps it while the ledger holds that credit (queued, in the journal, or applied):
// a top-up deleted then stays, Terminating, so the lists a new manager builds its books from
// still name its reference.
const FinalizerLedger = "videogen.dev/ledger"

// PointAccount condition types and reasons.
const (
	// ConditionFunded says whether the account has points available for new tasks.
	ConditionFunded = "Funded"

	ReasonActive    = "Active"
	ReasonSuspended = "Suspended"
	// ReasonClosing: the account is being deleted; it goes once it is empty.
	ReasonClosing           = "Closing"
	ReasonInvariantViolated = "InvariantViolated"
	ReasonHasBalance        = "HasBalance"
	ReasonDepleted          = "Depleted"
)

// PointAccountSpec holds what an administrator sets on an account. Balances are never in the
// spec: they change only through the ledger, which writes them to status.
type PointAccountSpec struct {
	// Description says whose account this is (a customer, a team).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Description string `json:"description,omitempty"`

	// Suspended accounts accept no new tasks; running tasks still settle and top-ups still apply.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
}

// JournalKind says where a journal entry's points came from.
// +kubebuilder:validation:Enum=Charge;TopUp;Refusal
type JournalKind string

const (
	// JournalCharge: a succeeded task's cost, added to spent.
	JournalCharge JournalKind = "Charge"
	// JournalTopUp: a PointTopUp's amount (negative for a debit), added to credited.
	JournalTopUp JournalKind = "TopUp"
	// JournalRefusal: a debit refused because it exceeded the available balance (amount 0:
	// nothing moves). It is recorded before the PointTopUp's status says so, so that no
	// manager applies that top-up later, when the balance would cover it.
	JournalRefusal JournalKind = "Refusal"
)

// JournalEntry is a change of credited or spent that its source object (the task or the
// top-up) does not show yet. It is written in the same update as the change, and removed once
// the source shows it, so a change retried after an error or a crash is found, not repeated.
type JournalEntry struct {
	// Kind of the source.
	// +required
	Kind JournalKind `json:"kind"`
	// Name of the VideoTask or PointTopUp.
	// +required
	Name string `json:"name"`
	// UID of the source, so a new object with the same name is a new source.
	// +required
	UID types.UID `json:"uid"`
	// Amount added to spent (a charge) or credited (a top-up; negative for a debit).
	// +required
	Amount int64 `json:"amount"`
	// Result of a charged task, so that a manager that takes over can finish the task from it.
	// +optional
	Result *TaskResult `json:"result,omitempty"`
	// BalanceAfter is the balance right after a top-up, for its status.
	// +optional
	BalanceAfter *int64 `json:"balanceAfter,omitempty"`
	// At is when the change was written.
	// +required
	At metav1.Time `json:"at"`
}

// PointAccountStatus is the account as the ledger keeps it. Credited and Spent are its two
// counters, changed only together with a journal entry. Frozen (the points held by the
// account's open tasks: each task is its own hold) and Balance (credited − spent − frozen) are
// a summary of the ledger's books, copied here within about a second.
type PointAccountStatus struct {
	// Balance is the number of points available for new tasks.
	// +optional
	Balance int64 `json:"balance"`
	// Frozen is the number of points held by tasks that have not settled.
	// +optional
	Frozen int64 `json:"frozen"`
	// Spent is the number of points deducted for succeeded tasks.
	// +optional
	Spent int64 `json:"spent"`
	// Credited is the total of the top-ups applied to this account, less its debits: this
	// account only (one created again in the namespace starts at 0, the top-ups applied to the
	// earlier one say so in their status.accountUID).
	// +optional
	Credited int64 `json:"credited"`
	// Holds is the number of tasks holding points.
	// +optional
	Holds int32 `json:"holds"`

	// Journal lists the recent changes of Credited and Spent that their source does not show
	// yet. Only the ledger writes it, always whole, so the list is atomic.
	// +listType=atomic
	// +optional
	Journal []JournalEntry `json:"journal,omitempty"`

	// Authority is the manager that keeps this account's books. A manager that takes over
	// writes its name here first, so that any write of an earlier one still in flight fails.
	// +optional
	Authority string `json:"authority,omitempty"`

	// ObservedGeneration is the generation the conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the account accepts new tasks; False with reason Suspended, Closing
	// or InvariantViolated) and Funded (it has points available).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pa,categories=videogen
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="a namespace holds one PointAccount and it must be named 'default'"
// +kubebuilder:printcolumn:name="Balance",type=integer,JSONPath=`.status.balance`
// +kubebuilder:printcolumn:name="Frozen",type=integer,JSONPath=`.status.frozen`
// +kubebuilder:printcolumn:name="Spent",type=integer,JSONPath=`.status.spent`
// +kubebuilder:printcolumn:name="Credited",type=integer,JSONPath=`.status.credited`
// +kubebuilder:printcolumn:name="Holds",type=integer,JSONPath=`.status.holds`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PointAccount is the prepaid points balance of the account that owns its namespace.
type PointAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds what an administrator sets on the account. Balances are never in the spec:
	// they change only through the ledger, which writes them to status.
	// +optional
	Spec PointAccountSpec `json:"spec,omitempty"`
	// status is the account as the ledger keeps it: credited and spent are its two counters;
	// frozen (the points held by open tasks) and balance (credited − spent − frozen) are copied
	// here within about a second of any change.
	// +optional
	Status PointAccountStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PointAccountList contains a list of PointAccount.
type PointAccountList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PointAccount `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PointAccount{}, &PointAccountList{})
}
