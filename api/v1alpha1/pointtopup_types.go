package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PointTopUp condition types and reasons.
const (
	// ConditionApplied says whether the top-up was credited to the account.
	ConditionApplied = "Applied"

	ReasonCredited        = "Credited"
	ReasonDebited         = "Debited"
	ReasonAccountNotFound = "AccountNotFound"
	// A credit to an account being deleted waits with ReasonAccountClosing (the tasks' reason):
	// it would only keep the account from closing, and is applied to the account created after
	// it.
	// ReasonDuplicateReference: another top-up of the namespace was applied with this reference,
	// to its account or to an earlier one; this one is never applied.
	ReasonDuplicateReference = "DuplicateReference"
	// ReasonDebitExceedsBalance: a debit larger than the available balance is never applied.
	ReasonDebitExceedsBalance = "DebitExceedsBalance"
)

// PointTopUpSpec is an offline, manual change of an account's points made by an administrator:
// a credit (a positive amount) or a debit or correction (a negative amount, with a note).
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a top-up is immutable; create a new one to correct it"
// +kubebuilder:validation:XValidation:rule="self.amount != 0",message="amount must not be 0"
// +kubebuilder:validation:XValidation:rule="self.amount >= 0 || (has(self.note) && size(self.note.trim()) > 0)",message="a debit (negative amount) needs a note saying why"
type PointTopUpSpec struct {
	// Amount of points to credit; negative to debit (a correction, or what is left when an
	// account is closed).
	// +kubebuilder:validation:Minimum=-1000000000
	// +kubebuilder:validation:Maximum=1000000000
	// +required
	Amount int64 `json:"amount"`

	// Reference's two XValidation rules accept what the pattern
	// ^[^\s\p{Z}\p{Cc}\p{Cf}]([^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*[^\s\p{Z}\p{Cc}\p{Cf}])?$ did (RE2's \s
	// is a space or a control character), but say in words what is wrong: the apiserver
	// quotes a pattern's regular expression in its refusal, which nobody can read. They also
	// refuse the invisible characters that are no format character (Cf), the rest of Unicode's
	// Default_Ignorable_Code_Point: variation selectors, the combining grapheme joiner, Hangul
	// fillers, Mongolian free variation selectors, and the Braille blank at either end.

	// Reference ties the top-up to its paperwork, e.g. an invoice number. It is unique in the
	// namespace for good: a second top-up with a reference already applied to its account, or
	// to an earlier account of the namespace, is refused. No space of any script at either end
	// (a no-break or ideographic space, a Braille blank) and no invisible or control character
	// anywhere (a zero-width space, a byte-order mark, a line separator, a variation selector, a
	// Hangul filler), so that "INV-1 " cannot pass for another reference than "INV-1". References
	// are compared as an accountant reads them (docs/ledger.md, rule 6): in Unicode NFKC, case
	// folded, every dash read as "-" and every space as a space, so "inv‑2026‑001" (non-breaking
	// hyphens) and fullwidth "ＩＮＶ-２０２６-００１" are "INV-2026-001". The namespace is the
	// scope: the same reference in another namespace is another account's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}\\x{034F}\\x{115F}\\x{1160}\\x{17B4}\\x{17B5}\\x{180B}-\\x{180F}\\x{2065}\\x{3164}\\x{FE00}-\\x{FE0F}\\x{FFA0}\\x{FFF0}-\\x{FFF8}\\x{E0000}-\\x{E0FFF}]')",message="reference must not contain control or invisible characters (a tab, a line break, a zero-width space, a byte-order mark, a variation selector, a Hangul filler)"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\p{Zs}\\x{2800}]') && !self.matches(r'[\\p{Zs}\\x{2800}]$')",message="reference must not begin or end with a space (of any kind, e.g. a no-break space or a Braille blank)"
	// +required
	Reference string `json:"reference"`

	// Note is free text for the audit trail; required for a debit.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Note string `json:"note,omitempty"`
}

// PointTopUpStatus records when the top-up was applied, to which account, and the balance
// right after it.
type PointTopUpStatus struct {
	// AppliedAt is when the amount was credited (or debited). Set once.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`

	// BalanceAfter is the account's available balance right after this top-up (top-ups
	// applied together count in their journal order).
	// +optional
	BalanceAfter *int64 `json:"balanceAfter,omitempty"`

	// AccountUID is the PointAccount the top-up was applied to, or that refused it (a
	// re-created account is another account).
	// +optional
	AccountUID types.UID `json:"accountUID,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Applied (True once applied; False with reason AccountNotFound while it
	// waits for the account, or DuplicateReference or DebitExceedsBalance when it is refused
	// for good).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ptu,categories=videogen
// +kubebuilder:printcolumn:name="Amount",type=integer,JSONPath=`.spec.amount`
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.spec.reference`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].reason`
// +kubebuilder:printcolumn:name="Balance After",type=integer,JSONPath=`.status.balanceAfter`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PointTopUp credits (or debits) points to the account of its namespace, exactly once. An
// applied PointTopUp is part of the account's audit trail: it cannot be edited or deleted, and
// what its status says of the application stays (else clearing it would let the policy that
// keeps applied top-ups allow the delete).
// Its Applied condition, once True or a refusal for good (DuplicateReference,
// DebitExceedsBalance), keeps its status and reason: a refused top-up stays refused (a new
// manager's books learn a refusal from it), and an applied one says so. The one exception is
// the write that first sets appliedAt with Applied=True: the ledger's books win over a refusal
// written by hand over a credit already in the account's journal.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.conditions) || !oldSelf.status.conditions.exists(o, o.type == 'Applied' && (o.status == 'True' || (o.status == 'False' && (o.reason == 'DuplicateReference' || o.reason == 'DebitExceedsBalance')))) || (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'Applied' && oldSelf.status.conditions.exists(o, o.type == 'Applied' && o.status == c.status && o.reason == c.reason))) || (has(self.status) && has(self.status.appliedAt) && !has(oldSelf.status.appliedAt) && has(self.status.balanceAfter) && has(self.status.accountUID) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'Applied' && c.status == 'True' && (c.reason == 'Credited' || c.reason == 'Debited')))",message="a top-up's Applied condition, once True or refused for good (DuplicateReference, DebitExceedsBalance), keeps its status and reason: a refused top-up stays refused (only the write that first sets appliedAt, balanceAfter and accountUID may make it Applied=True), an applied one applied"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.appliedAt) || (has(self.status) && has(self.status.appliedAt) && self.status.appliedAt == oldSelf.status.appliedAt && has(self.status.balanceAfter) == has(oldSelf.status.balanceAfter) && (!has(self.status.balanceAfter) || self.status.balanceAfter == oldSelf.status.balanceAfter) && has(self.status.accountUID) == has(oldSelf.status.accountUID) && (!has(self.status.accountUID) || self.status.accountUID == oldSelf.status.accountUID))",message="an applied top-up's appliedAt, balanceAfter and accountUID are part of the audit trail and cannot change"
type PointTopUp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the change of the account's points: an amount (negative for a debit, with a
	// note) and the reference that ties it to its paperwork. It cannot change after creation.
	// +required
	Spec PointTopUpSpec `json:"spec"`
	// status records when the top-up was applied, to which account, and the balance right after
	// it.
	// +optional
	Status PointTopUpStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PointTopUpList contains a list of PointTopUp.
type PointTopUpList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PointTopUp `json:"items"`
}

// RefusedForGood reports whether the ledger refused the top-up for good (its status says so):
// nothing was or will be credited. An applied top-up (appliedAt, which the CRD's rule keeps for
// good) is never refused, whatever its conditions say: they are not part of that rule, and a
// hand-edited refusal must not make the books forget its credit's reference.
func (t *PointTopUp) RefusedForGood() bool {
	if t.Status.AppliedAt != nil {
		return false
	}
	c := meta.FindStatusCondition(t.Status.Conditions, ConditionApplied)
	return c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == ReasonDuplicateReference || c.Reason == ReasonDebitExceedsBalance)
}

func init() {
	SchemeBuilder.Register(&PointTopUp{}, &PointTopUpList{})
}
