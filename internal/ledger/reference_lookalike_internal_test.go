package ledger

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// One invoice number, typed or pasted in a look-alike spelling. An earlier fix made every
// kind of space compare as a space; the other characters an invoice number is made of still
// compared code point by code point, so these all credited the invoice again:
//   - its hyphens a non-breaking hyphen (U+2011, what a word processor puts in a number it
//     keeps on one line), a Unicode hyphen (U+2010), an en dash (U+2013, what "smart
//     punctuation" makes of a typed "-") or a minus sign (U+2212, a spreadsheet's);
//   - its digits or letters fullwidth (what a CJK input method types: "ＩＮＶ－２０２６－００１");
//   - another case ("inv-2026-001": an accountant reads it as the same invoice, and nobody
//     issues two invoices told apart only by case).
//
// Steps: 1. an administrator credits "INV-2026-001" for 100 points: applied. 2. The same
// invoice is entered again in a look-alike spelling, every character of which the schema
// takes. Nothing races. The user saw: the second top-up Credited, balance 200, one invoice
// paid twice (kubectl get ptu and videogenctl account show print both the same, or nearly).
// Now a reference is compared by its NFKC case fold, default-ignorable characters left out,
// dashes read as "-" and spaces as a space (see referenceKey); a new manager's books, built
// from the list, agree.
func TestLookAlikeReferencesAreTheSame(t *testing.T) {
	for _, tc := range []struct{ name, first, again string }{
		{"a non-breaking hyphen", "INV-2026-001", "INV\u20112026\u2011001"},
		{"a Unicode hyphen", "INV-2026-001", "INV\u20102026\u2010001"},
		{"an en dash", "INV-2026-001", "INV\u20132026\u2013001"},
		{"a minus sign", "INV-2026-001", "INV\u22122026\u2212001"},
		{"fullwidth letters and digits", "INV-2026-001", "ＩＮＶ-２０２６-００１"},
		{"a fullwidth hyphen-minus", "INV-2026-001", "INV\uff0d2026\uff0d001"},
		{"another case", "INV-2026-001", "inv-2026-001"},
		{"a German sharp s", "Rechnung-Straße-7", "RECHNUNG-STRASSE-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			if _, out := h.applyTopUp(h.l, "first", tc.first, 100); !out.Applied {
				t.Fatalf("the first top-up: %+v", out)
			}
			_, out := h.applyTopUp(h.l, "again", tc.again, 100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference || !strings.Contains(out.Message, "PointTopUp first") {
				t.Fatalf("reference %+q after %+q was not refused as a duplicate: %+v", tc.again, tc.first, out)
			}
			// The refusal names both spellings: the administrator sees why they are one.
			if want := fmt.Sprintf("(the same as %q)", tc.first); !strings.Contains(out.Message, want) {
				t.Errorf("the refusal %q does not say %s", out.Message, want)
			}
			h.books(h.settle(h.l), 100, 0, 0)

			l2 := h.start(h.ctx, "ledger-2")
			_, out = h.applyTopUp(l2, "third", tc.again, 100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
				t.Fatalf("after a failover, reference %+q was not refused: %+v", tc.again, out)
			}
		})
	}
	// What prints differently still counts: another digit, a letter for a digit (O for 0), a
	// dot or a slash for a hyphen, a hyphen left out.
	h := newHarness(t, 0)
	for i, ref := range []string{"INV-2026-001", "INV-2026-002", "INV-2026-OO1", "INV.2026.001", "INV/2026/001", "INV2026001", "INV-2026_001"} {
		if _, out := h.applyTopUp(h.l, fmt.Sprintf("distinct-%d", i), ref, 10); !out.Applied {
			t.Fatalf("reference %q: %+v, want applied", ref, out)
		}
	}
}

// Invisible characters inside a reference. The schema refuses them (a zero-width
// space, a byte-order mark, a soft hyphen, a variation selector), but a top-up stored before
// that rule (CRD validation ratchets: it stays, and a new manager lists it) or written past it
// is still compared: the books leave them out, as Unicode's default-ignorable code points are
// meant to be, so "INV-2026-001" with a zero-width space inside is "INV-2026-001".
func TestInvisibleCharactersInAReferenceDoNotCount(t *testing.T) {
	key := func(ref string) string {
		return referenceKey(&videogenv1alpha1.PointTopUp{Spec: videogenv1alpha1.PointTopUpSpec{Reference: ref}})
	}
	want := key("INV-2026-001")
	for _, ref := range []string{
		"INV-\u200b2026-001", "\ufeffINV-2026-001", "INV-2026\u00ad-001", "INV\u2060-2026-001",
		"INV-2026-001\ufe0f", "I\u034fNV-2026-001", "INV-\u200d2026-\u200c001", "INV-2026-\u2066001\u2069",
	} {
		if got := key(ref); got != want {
			t.Errorf("reference %+q compares as %+q, want %+q (that of INV-2026-001)", ref, got, want)
		}
	}
}

// The rule's change itself. Checked, holds (a pin): top-ups applied under the earlier
// rule (only spaces folded), in which "INV-2026-001" and "inv-2026-001" were two references, are both applied
// before the upgrade: one shown applied in its status, the other only in the account's
// journal (the manager stopped between the account write and the top-up's status write, as a
// rollout stops it). The new manager's books, built under the new rule, have the two compare
// equal. Neither is refused (the one shown applied is never asked again; the one in the
// journal is found there before its reference is looked at) and neither is credited again:
// the account keeps its 200 points, and the journal entry's top-up gets its Credited status.
// A third spelling of that invoice, asked after the upgrade, is refused.
func TestARuleChangeNeitherRefusesNorRecreditsAppliedTopUps(t *testing.T) {
	round21 := func(ref string) string {
		return strings.Map(func(r rune) rune {
			if unicode.Is(unicode.Zs, r) || r == '\u2800' {
				return ' '
			}
			return r
		}, norm.NFC.String(ref))
	}
	h := newHarness(t, 0)
	referenceKeyOf = round21
	t.Cleanup(func() { referenceKeyOf = canonicalReference })

	if _, out := h.applyTopUp(h.l, "upper", "INV-2026-001", 100); !out.Applied {
		t.Fatalf("the first top-up: %+v", out)
	}
	lower := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "lower"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "inv-2026-001"}}
	must(t, k8s.Create(h.ctx, lower))
	if out, err := h.l.ApplyTopUp(lower.DeepCopy()); err != nil || !out.Queued {
		t.Fatalf("the second top-up under the earlier rule: %+v, %v", out, err)
	}
	h.books(h.settle(h.l), 200, 0, 0) // in the journal; its status is never written by this manager

	referenceKeyOf = canonicalReference // the upgrade
	l2 := h.start(h.ctx, "ledger-2")
	upper := &videogenv1alpha1.PointTopUp{}
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(lower), lower))
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "upper"}, upper))
	if out := h.reapply(l2, upper); !out.AlreadyApplied {
		t.Fatalf("the top-up applied and shown before the upgrade: %+v, want already applied", out)
	}
	if out := h.reapply(l2, lower); !out.Applied || out.BalanceAfter != 200 {
		t.Fatalf("the top-up in the journal at the upgrade: %+v, want applied with balance 200", out)
	}
	h.booksClosed(h.settle(l2), 200, 0, 0)

	if _, out := h.applyTopUp(l2, "again", "Inv-2026-001", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Fatalf("a third spelling after the upgrade: %+v, want refused as a duplicate", out)
	}
	h.books(h.settle(l2), 200, 0, 0)
}

// An applied top-up's Applied condition edited to a refusal. The CRD's rule keeps an
// applied top-up's appliedAt, balanceAfter and accountUID (the audit trail: "what its status
// says of the application stays"), but not its conditions. Whoever may write pointtopups/status
// (a cluster administrator's `kubectl edit --subresource=status`, a script that "marks the
// duplicate" by hand, a restored backup of a status written by another tool) sets Applied to
// False with reason DuplicateReference on a credited top-up: the kube-apiserver takes it
// (appliedAt and the rest are unchanged), and the delete policy still keeps it (appliedAt).
//
// Steps: 1. "paid" (reference INV-7, 100 points) is applied; its status says so. 2. Its
// condition is edited to Applied=False/DuplicateReference. 3. A new manager is elected and
// builds its books from the list: the top-up read as refused (RefusedForGood came before
// appliedAt), so INV-7 is not among the references used. 4. INV-7 is entered again. The user
// saw: the second top-up Credited, balance 200, one invoice paid twice, and `videogenctl
// account show` listing the first as refused although its points are in the balance. An
// applied top-up is now never refused for good, whatever its conditions say.
func TestAnAppliedTopUpEditedToRefusedKeepsItsReference(t *testing.T) {
	h := newHarness(t, 0)
	paid, out := h.applyTopUp(h.l, "paid", "INV-7", 100)
	if !out.Applied {
		t.Fatalf("the first top-up: %+v", out)
	}
	h.books(h.settle(h.l), 100, 0, 0)
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(paid), paid))
	paid.Status.Conditions = []metav1.Condition{{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse,
		Reason: videogenv1alpha1.ReasonDuplicateReference, Message: "marked by hand", LastTransitionTime: metav1.Now()}}
	must(t, k8s.Status().Update(h.ctx, paid)) // the kube-apiserver takes it: appliedAt and the rest are unchanged
	if paid.RefusedForGood() {
		t.Errorf("a top-up whose status says it was applied reads as refused for good")
	}

	l2 := h.start(h.ctx, "ledger-2")
	if _, out := h.applyTopUp(l2, "again", "INV-7", 100); !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
		t.Fatalf("INV-7 entered again after a failover: %+v, want refused as a duplicate", out)
	}
	h.books(h.settle(l2), 100, 0, 0)
}
