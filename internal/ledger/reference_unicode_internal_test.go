package ledger

import (
	"strings"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// One invoice number typed two ways. A reference is unique in its
// namespace for good, and the books compared references byte for byte. "INV-Müller-7" can be
// written with a precomposed ü (U+00FC, NFC: what most keyboards and web forms send) or with u
// followed by a combining diaeresis (U+0308, NFD: what macOS gives for a name copied from a
// file name or a Finder label, and what many PDF text extractions produce). The two are
// canonically equivalent: every terminal, kubectl get ptu and videogenctl account show print
// them the same, and the schema (rightly) takes both, a combining mark being neither a space
// nor invisible.
//
// Steps: 1. an administrator credits INV-Müller-7 (NFC) for 100 points: applied. 2. The same
// invoice is entered again, its number pasted from a file name (NFD): videogenctl topup acme
// 100 --reference 'INV-Müller-7'. Nothing races; both are ordinary administrator steps, and
// the second is exactly the double entry the reference's uniqueness exists to catch. The
// user saw: the second top-up Credited, balance 200, one invoice paid once.
func TestCanonicallyEquivalentReferenceIsTheSame(t *testing.T) {
	for _, tc := range []struct{ name, first, again string }{
		{"precomposed then decomposed", "INV-M\u00fcller-7", "INV-Mu\u0308ller-7"},
		{"decomposed then precomposed", "Rechnung-A\u030a-1", "Rechnung-\u00c5-1"},
		{"an angstrom sign for an A with ring", "INV-\u00c5", "INV-\u212b"},
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

			// A new manager builds its books from the list: the reference is used there too.
			l2 := h.start(h.ctx, "ledger-2")
			_, out = h.applyTopUp(l2, "third", tc.again, 100)
			if !out.Refused || out.Reason != videogenv1alpha1.ReasonDuplicateReference {
				t.Fatalf("after a failover, reference %+q was not refused: %+v", tc.again, out)
			}
		})
	}
}
