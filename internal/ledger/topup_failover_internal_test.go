package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Account-write modes of a manager about to die.
const (
	writesWork     int32 = iota
	writesUnsent         // every account write fails and lands nowhere (the kube-apiserver unreachable)
	writeLandsOnce       // the next account write carrying a Refusal lands and reports an error; later ones land nowhere
)

// unsent counts the account writes carrying a Refusal that a dying manager tried and that
// landed nowhere.
var unsent atomic.Int32

// dyingClient is the harness's client, whose PointAccount status writes follow *mode.
func (h *harness) dyingClient(mode *atomic.Int32) client.Client {
	return interceptor.NewClient(h.faults.client().(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*videogenv1alpha1.PointAccount); ok {
				switch mode.Load() {
				case writesUnsent:
					if hasRefusal(obj.(*videogenv1alpha1.PointAccount)) {
						unsent.Add(1)
					}
					return errLost
				case writeLandsOnce:
					if !hasRefusal(obj.(*videogenv1alpha1.PointAccount)) {
						break
					}
					if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
						return err
					}
					mode.Store(writesUnsent)
					return errLost
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

func hasRefusal(a *videogenv1alpha1.PointAccount) bool {
	for _, j := range a.Status.Journal {
		if j.Kind == videogenv1alpha1.JournalRefusal {
			return true
		}
	}
	return false
}

// A refused debit asked again after a manager failover while its Refusal entry was
// only queued. Checked, holds, both ways:
//
//   - The entry never reached the account (manager ledger-a lost the kube-apiserver, then died):
//     nobody was told of the refusal (the top-up's status is written only after the entry), so
//     the new manager decides afresh, and once a credit covers the debit, it is debited, once.
//   - The entry's write landed but reported an error, and ledger-a died before it retried: the
//     account says the debit was refused, so ledger-2 refuses it again even though the credit
//     would now cover it (rule 6: a refused debit is refused for good, never debited).
//
// Steps: balance 100; PointTopUp close-out (-300, CLOSE-1) applied on ledger-a: refused, its
// Refusal queued; ledger-a's write (not sent / landed-but-failed); ledger-a dies; ledger-2
// builds its books; PointTopUp pay-2 (+500, PAY-2) on ledger-2; close-out asked again on
// ledger-2 (its status was never written: the PointTopUp controller asks again after a
// failover).
func TestARefusedDebitQueuedAtAFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     int32
		debited  bool
		credited int64
	}{
		{"its refusal never written: decided afresh", writesUnsent, true, 300},
		{"its refusal landed though its write failed: refused again", writeLandsOnce, false, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			var mode atomic.Int32
			ctxA, dieA := context.WithCancel(h.ctx)
			la := h.startWith(ctxA, "ledger-a", func(c *Config) { c.Client = h.dyingClient(&mode) })
			waitFor(t, func() bool { // ledger-a's own first writes done: the next carries the Refusal
				b := la.book(h.ns)
				b.mu.Lock()
				defer b.mu.Unlock()
				return !b.flushing && !b.dirty && len(b.queued) == 0
			})
			mode.Store(tc.mode)

			debit := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "close-out"),
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: -300, Reference: "CLOSE-1", Note: "closing"}}
			must(t, k8s.Create(h.ctx, debit))
			out, err := la.ApplyTopUp(debit)
			if err != nil || !out.Queued {
				t.Fatalf("the debit on ledger-a: %+v %v, want its refusal queued", out, err)
			}
			// For writeLandsOnce: it landed, and the retries after it land nowhere.
			before := unsent.Load()
			waitFor(t, func() bool { return mode.Load() == writesUnsent && unsent.Load() > before })
			dieA()
			if landed := hasRefusal(h.account()); landed != (tc.mode == writeLandsOnce) {
				t.Fatalf("the account holds the Refusal: %v", landed)
			}

			l2 := h.start(h.ctx, "ledger-2")
			if _, out := h.applyTopUp(l2, "pay-2", "PAY-2", 500); !out.Applied {
				t.Fatalf("the credit on ledger-2: %+v", out)
			}
			out = h.reapply(l2, debit)
			if out.Applied != tc.debited || out.Refused == tc.debited {
				t.Fatalf("the debit asked again on ledger-2: %+v, want debited=%v", out, tc.debited)
			}
			if out.Refused && out.Reason != videogenv1alpha1.ReasonDebitExceedsBalance {
				t.Fatalf("refused for %s, want %s", out.Reason, videogenv1alpha1.ReasonDebitExceedsBalance)
			}
			h.books(h.settle(l2), tc.credited, 0, 0)
		})
	}
}

// One invoice number, its spaces typed two ways. References compare in NFC
// (reference_unicode_internal_test.go), so that canonically equivalent spellings are one reference; a no-break space (U+00A0)
// and a space are not canonically equivalent, yet every terminal, kubectl get ptu and
// videogenctl account show print them the same. Invoice numbers with spaces ("INV 2026 17")
// are common, and a no-break space is what a number copied from a PDF, a web page or a
// spreadsheet cell usually carries (HTML's &nbsp;, Excel's thousands separator). The schema
// (rightly) takes spaces of any kind inside a reference (only at its ends are they refused).
//
// Steps: 1. an administrator credits "INV 2026 17" (typed) for 100 points: applied. 2. The
// same invoice is entered again, its number pasted from the PDF: "INV\u00a02026\u00a017".
// Nothing races. The user saw: the second top-up Credited, balance 200, one invoice paid
// twice. Spaces of every kind (Unicode Zs: no-break, narrow no-break, figure, thin, em,
// ideographic) now compare as a space (so "a space of any kind" means the same in the schema's
// rule and in the books); a new manager's books, built from the list, agree.
func TestReferencesDifferingOnlyInTheirKindOfSpaceAreTheSame(t *testing.T) {
	for _, tc := range []struct{ name, first, again string }{
		{"a space then a no-break space", "INV 2026 17", "INV\u00a02026\u00a017"},
		{"a narrow no-break space then a space", "Rechnung\u202f42", "Rechnung 42"},
		{"a figure space then a space", "PO\u20071234", "PO 1234"},
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
			h.books(h.settle(h.l), 100, 0, 0)

			l2 := h.start(h.ctx, "ledger-2")
			_, out = h.applyTopUp(l2, "third", tc.again, 100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
				t.Fatalf("after a failover, reference %+q was not refused: %+v", tc.again, out)
			}
		})
	}
	// Spaces still count: "INV 1" and "INV1", or one space and two, print differently and are
	// two references.
	h := newHarness(t, 0)
	for i, ref := range []string{"INV 1", "INV1", "INV  1"} {
		if _, out := h.applyTopUp(h.l, fmt.Sprintf("distinct-%d", i), ref, 10); !out.Applied {
			t.Fatalf("reference %q: %+v, want applied", ref, out)
		}
	}
}

// A top-up edited between the PointTopUp controller's read and its credit. Checked,
// holds: nothing pinned the spec's immutability against a real kube-apiserver. An
// administrator who typed 100 for 1000 edits the top-up (kubectl edit, a merge patch, an
// update from a stale copy) while its credit is queued: every edit of the spec is refused
// (Invalid), so the amount the ledger read is the one credited and the one its status and
// account show report; the correction is a new top-up.
func TestATopUpsSpecCannotBeEditedWhileItsCreditIsQueued(t *testing.T) {
	h := newHarness(t, 0)
	tu := &videogenv1alpha1.PointTopUp{ObjectMeta: objectMeta(h.ns, "typo"),
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-9"}}
	must(t, k8s.Create(h.ctx, tu))
	read := tu.DeepCopy() // the controller's copy

	edits := map[string]func() error{
		"update the amount": func() error {
			c := read.DeepCopy()
			c.Spec.Amount = 1000
			return k8s.Update(h.ctx, c)
		},
		"merge-patch the reference": func() error {
			return k8s.Patch(h.ctx, read.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"reference":"INV-10"}}`)))
		},
		"add a note": func() error {
			return k8s.Patch(h.ctx, read.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"note":"late"}}`)))
		},
	}
	if _, err := h.l.ApplyTopUp(read); err != nil {
		t.Fatal(err)
	}
	for name, edit := range edits {
		if err := edit(); !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid (a top-up is immutable)", name, err)
		}
	}
	if out := h.reapply(h.l, read); !out.Applied || out.BalanceAfter != 100 {
		t.Fatalf("the top-up: %+v, want applied with balance 100", out)
	}
	h.books(h.settle(h.l), 100, 0, 0)
}
