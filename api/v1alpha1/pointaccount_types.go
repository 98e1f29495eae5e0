package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PointAccountName is the only allowed name of a PointAccount: a namespace is one account.
const PointAccountName = "default"

// PointAccount condition types and reasons.
const (
	// ConditionFunded says whether the account has points available for new tasks.
	ConditionFunded = "Funded"

	ReasonActive            = "Active"
	ReasonSuspended         = "Suspended"
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

// HoldGroup lists the unsettled tasks that hold the same number of points.
type HoldGroup struct {
	// Amount of points each task of the group holds.
	// +kubebuilder:validation:Minimum=0
	// +required
	Amount int64 `json:"amount"`
	// Tasks are the names of the VideoTasks (in the account's namespace), sorted.
	// +listType=atomic
	// +required
	Tasks []string `json:"tasks"`
}

// Reservation is a block of points that a REST apiserver replica took from the balance, so that
// it can admit many tasks with one compare-and-swap instead of one each. A task admitted under
// a reservation carries its name in the LabelReservation label and moves its price from the
// reservation into a hold of its own soon after it is created.
type Reservation struct {
	// Name identifies the reservation and its holder; it is a label value.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// Amount is the number of points still in the reservation: not yet admitted, or admitted to
	// tasks that do not hold their own points yet.
	// +kubebuilder:validation:Minimum=0
	// +required
	Amount int64 `json:"amount"`
	// RenewedAt is when the holder last renewed the reservation. One that is not renewed for the
	// manager's reservation TTL (measured on the manager's own clock) is released.
	// +required
	RenewedAt metav1.MicroTime `json:"renewedAt"`
}

// LabelReservation names the reservation a task was admitted under (see Reservation).
const LabelReservation = "videogen.dev/reservation"

// SettlementOutcome says where a settled hold's points went.
// +kubebuilder:validation:Enum=Deducted;Refunded
type SettlementOutcome string

const (
	// SettlementDeducted moved the held points to spent.
	SettlementDeducted SettlementOutcome = "Deducted"
	// SettlementRefunded returned the held points to the balance.
	SettlementRefunded SettlementOutcome = "Refunded"
)

// Settlement records a settled hold until the task's terminal status acknowledges it, so that
// a settlement retried after a crash finds the first outcome instead of moving points twice.
type Settlement struct {
	// Task is the name of the settled VideoTask.
	// +required
	Task string `json:"task"`
	// Amount of points that moved.
	// +required
	Amount int64 `json:"amount"`
	// Outcome says whether the points were deducted or refunded.
	// +required
	Outcome SettlementOutcome `json:"outcome"`
	// SettledAt is when the points moved.
	// +required
	SettledAt metav1.Time `json:"settledAt"`
}

// AppliedTopUp records a credited PointTopUp until the top-up's status acknowledges it.
type AppliedTopUp struct {
	// Name of the PointTopUp.
	// +required
	Name string `json:"name"`
	// UID of the PointTopUp, so a new object with the same name is a new top-up.
	// +required
	UID string `json:"uid"`
	// Amount credited.
	// +required
	Amount int64 `json:"amount"`
	// BalanceAfter is the available balance right after the credit.
	// +required
	BalanceAfter int64 `json:"balanceAfter"`
	// AppliedAt is when the amount was credited.
	// +required
	AppliedAt metav1.Time `json:"appliedAt"`
}

// PointAccountStatus holds the account's figures. The ledger keeps, after every change,
// credited = balance + frozen + spent and frozen = the sum of holds, where a reservation is a
// hold too: frozen = Σ task holds + reserved, and reserved = Σ reservations.
type PointAccountStatus struct {
	// Balance is the number of points available for new tasks.
	// +optional
	Balance int64 `json:"balance"`
	// Frozen is the number of points held for tasks that have not settled, including Reserved.
	// +optional
	Frozen int64 `json:"frozen"`
	// Reserved is the part of Frozen held in reservations for tasks being admitted.
	// +optional
	Reserved int64 `json:"reserved,omitempty"`
	// Spent is the number of points deducted for succeeded tasks.
	// +optional
	Spent int64 `json:"spent"`
	// Credited is the total of all top-ups ever applied.
	// +optional
	Credited int64 `json:"credited"`

	// Holds are the points frozen for unsettled tasks, grouped by amount (in increasing order).
	// Every compare-and-swap carries the whole status and a busy account has thousands of
	// holds, so each is just a task name in its group's list: a kube-apiserver status update
	// with 1,404 holds took 18 ms as a map of task to points and 9 ms as plain strings
	// (docs/benchmarks.md). Read them with HoldsByTask.
	// +listType=atomic
	// +optional
	Holds []HoldGroup `json:"holds,omitempty"`

	// Reservations are the blocks of points REST apiserver replicas hold to admit tasks.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Reservations []Reservation `json:"reservations,omitempty"`
	// ReservationsRecalledAt is when a replica short of points last asked the others to return
	// what they hold in reservations; each holder does so once it has seen a new value.
	// +optional
	ReservationsRecalledAt *metav1.MicroTime `json:"reservationsRecalledAt,omitempty"`

	// Settlements are recently settled holds not yet acknowledged by their task's status.
	// Only the ledger writes them, always whole, so the list is atomic.
	// +listType=atomic
	// +optional
	Settlements []Settlement `json:"settlements,omitempty"`

	// TopUps are recently applied top-ups not yet acknowledged by the PointTopUp's status.
	// +listType=atomic
	// +optional
	TopUps []AppliedTopUp `json:"topUps,omitempty"`

	// ObservedGeneration is the generation the conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the account can be used) and Funded (it has points available).
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
// +kubebuilder:printcolumn:name="Reserved",type=integer,JSONPath=`.status.reserved`,priority=1
// +kubebuilder:printcolumn:name="Spent",type=integer,JSONPath=`.status.spent`
// +kubebuilder:printcolumn:name="Credited",type=integer,JSONPath=`.status.credited`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PointAccount is the prepaid points balance of the account that owns its namespace.
type PointAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec PointAccountSpec `json:"spec,omitempty"`
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
