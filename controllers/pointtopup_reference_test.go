package controllers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// oldReferencePattern is the pattern spec.reference had before the reference rules, whose refusal quoted
// it to the user ("should match '^[^\s\p{Z}\p{Cc}\p{Cf}]...'").
const oldReferencePattern = `^[^\s\p{Z}\p{Cc}\p{Cf}]([^\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*[^\s\p{Z}\p{Cc}\p{Cf}])?$`

// hostileReferences are references built around every control, format (invisible) and
// separator character of Go's Unicode tables, and a few look-alikes of other categories, alone,
// at either end, inside, and doubled inside.
func hostileReferences() []string {
	runes := []rune{'A', ' ', '-', '\u00ad', '\u034f', '\u115f', '\u1160', '\u17b4', '\u180e', '\u2800', '\u3164',
		'\uffa0', '\ufffc', '\ufffd', '\U000e0001', '\U000e0020', '\U0001d173', '\U000f0000',
		'\u180b', '\u180f', '\u2065', '\ufe00', '\ufe0f', '\ufff0', '\U000e0100', '\U000e01ef', '\U000e0fff', '\u17b5'}
	for _, table := range []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Z} {
		for _, r16 := range table.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				runes = append(runes, r)
			}
		}
		for _, r32 := range table.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				runes = append(runes, r)
			}
		}
	}
	var refs []string
	for _, r := range runes {
		c := string(r)
		refs = append(refs, c, c+"INV-1", "INV-1"+c, "INV"+c+"1", "INV"+c+c+"1", c+"INV-1"+c)
	}
	return append(refs, "A", "INV 2026/001", "請求書-1", "Rechnung Nr. 7 (Ä)", "INV\u00a01", "INV\u30001", "a b",
		"INV-1\r\n", "\tINV-1", "INV\x7f1", "INV\u200d1", "👨\u200d👩\u200d👧", "e\u0301", strings.Repeat("x", 128))
}

// invisibleBeyondCf reports whether ref has one of the invisible characters the old pattern
// took (Default_Ignorable_Code_Point outside Cf) anywhere, or a Braille blank at either end:
// the only strings the rules refuse beyond what the pattern did.
func invisibleBeyondCf(ref string) bool {
	if strings.HasPrefix(ref, "\u2800") || strings.HasSuffix(ref, "\u2800") {
		return true
	}
	return strings.ContainsFunc(ref, func(r rune) bool {
		switch {
		case r == 0x034f, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r >= 0x180b && r <= 0x180f, r == 0x2065,
			r == 0x3164, r >= 0xfe00 && r <= 0xfe0f, r == 0xffa0, r >= 0xfff0 && r <= 0xfff8, r >= 0xe0000 && r <= 0xe0fff:
			return true
		}
		return false
	})
}

// PointTopUp references and what the apiserver says of a refused one.
var _ = Describe("Top-up references", func() {
	// What was wrong: a reference with a space at either end or an invisible character was
	// refused with the apiserver's message for a pattern, which quotes the regular expression
	// whole: `spec.reference in body should match '^[^\s\p{Z}\p{Cc}\p{Cf}]([^\p{Cc}...'`.
	// videogenctl topup --reference "INV-1 " (a number pasted from a PDF) printed that, and
	// the administrator could not tell what to change. The pattern is now two CEL rules that
	// say it in words.
	//
	// The proof that the rules take exactly the strings the pattern took: a throwaway CRD in
	// the same kube-apiserver keeps the old pattern, and each hostile string is tried (dry
	// run) both there and as a real PointTopUp's reference. Both verdicts come from the same
	// binary's regular expressions and Unicode tables, so a difference is a difference of the
	// rules, not of Go versions.
	It("refuses exactly what the old pattern refused, saying in words what is wrong", func() {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "oldrefs.adv20.videogen.dev"},
			"spec": map[string]any{
				"group": "adv20.videogen.dev", "scope": "Namespaced",
				"names": map[string]any{"plural": "oldrefs", "singular": "oldref", "kind": "OldRef", "listKind": "OldRefList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
						"reference": map[string]any{"type": "string", "minLength": int64(1), "maxLength": int64(128), "pattern": oldReferencePattern},
					}}}}},
			},
		}}
		err := k8sClient.Create(ctx, crd)
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		old := func(ref string) error {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "adv20.videogen.dev/v1", "kind": "OldRef",
				"metadata":  map[string]any{"namespace": "default", "name": envsuite.Unique("old")},
				"reference": ref,
			}}
			return k8sClient.Create(ctx, u, client.DryRunAll)
		}
		// The CRD is served once the apiserver's discovery and the client's mapper know it.
		Eventually(func() error { return old("A") }, 20*time.Second).Should(Succeed())

		refs := hostileReferences()
		var accepted, refused int
		for _, ref := range refs {
			oldErr := old(ref)
			t := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: envsuite.Unique("ref")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: ref}}
			newErr := k8sClient.Create(ctx, t, client.DryRunAll)
			want := oldErr == nil && !invisibleBeyondCf(ref)
			Expect(newErr == nil).To(Equal(want), "reference %+q: old pattern says %v, the new rules %v", ref, oldErr, newErr)
			if newErr == nil {
				accepted++
				continue
			}
			refused++
			Expect(apierrors.IsInvalid(newErr)).To(BeTrue(), "%+q: %v", ref, newErr)
			msg := newErr.Error()
			Expect(msg).To(ContainSubstring("spec.reference"), "%+q", ref)
			Expect(msg).NotTo(ContainSubstring(`\p{`), "%+q", ref)
			Expect(msg).NotTo(ContainSubstring("should match"), "%+q", ref)
			Expect(msg).To(Or(ContainSubstring("reference must not contain control or invisible characters"),
				ContainSubstring("reference must not begin or end with a space"),
				ContainSubstring("at least 1 chars long")), "%+q", ref)
		}
		By(fmt.Sprintf("%d references accepted, %d refused", accepted, refused))
		Expect(accepted).To(BeNumerically(">", 50))
		Expect(refused).To(BeNumerically(">", 1000))
	})

	DescribeTable("says in words why a reference is refused",
		func(ref, want string) {
			t := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: envsuite.Unique("ref")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: ref}}
			err := k8sClient.Create(ctx, t, client.DryRunAll)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
			Expect(err.Error()).NotTo(ContainSubstring(`\p{`))
		},
		Entry("a space at the end", "INV-1 ", "reference must not begin or end with a space"),
		Entry("a no-break space at the start", "\u00a0INV-1", "reference must not begin or end with a space"),
		Entry("an ideographic space at the end", "INV-1\u3000", "reference must not begin or end with a space"),
		Entry("a zero-width space inside", "INV\u200b-1", "reference must not contain control or invisible characters"),
		Entry("a byte-order mark at the start", "\ufeffINV-1", "reference must not contain control or invisible characters"),
		Entry("a line break at the end", "INV-1\n", "reference must not contain control or invisible characters"),
		Entry("a tab inside", "INV\t1", "reference must not contain control or invisible characters"),
	)
})

var _ = Describe("Invisible characters that are not format characters", func() {
	// What breaks: the schema refused, in a reference, every control and format (Cf) character
	// and every space at either end, so that "INV-1" pasted with something invisible is not a
	// second reference. But Unicode's invisible characters (Default_Ignorable_Code_Point) are
	// not all Cf: a variation selector (U+FE0F, which an emoji keyboard or a copy from a web
	// page leaves behind), the combining grapheme joiner (U+034F), the Hangul fillers (U+3164,
	// U+115F, U+FFA0: letters that print as nothing) and the Mongolian free variation
	// selectors are marks or letters, so the pattern took them anywhere, and the ledger, which
	// compares references by their code points, credited the invoice a second time. The
	// Braille blank (U+2800) prints as a space but is a symbol. kubectl get ptu and videogenctl
	// account show print both references the same.
	//
	// Steps: 1. an administrator applies INV-<n> for 100 points (credited). 2. The same invoice
	// is applied again with the character at one end or inside. Nothing races.
	DescribeTable("does not credit an applied reference again when it comes back with an invisible mark or letter",
		func(pad func(string) string) {
			stop := startManager(testOptions(testbackend.New()))
			DeferCleanup(stop)
			ns := suite.NewAccount(0)
			first := suite.TopUp(ns, envsuite.Unique("inv"), 100)
			Eventually(appliedReason(first)).Should(Equal(videogenv1alpha1.ReasonCredited))

			again := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("again")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: pad(first.Spec.Reference)}}
			if err := k8sClient.Create(ctx, again); err != nil {
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
				Expect(err.Error()).To(Or(ContainSubstring("reference must not contain control or invisible characters"),
					ContainSubstring("reference must not begin or end with a space")))
			} else {
				Eventually(appliedReason(again)).ShouldNot(BeEmpty())
				Expect(appliedReason(again)()).To(Equal(videogenv1alpha1.ReasonDuplicateReference),
					"reference %+q was credited beside %+q", again.Spec.Reference, first.Spec.Reference)
			}
			Consistently(func() int64 { return suite.AccountOf(ns).Status.Credited }, 500*time.Millisecond).Should(Equal(int64(100)))
		},
		Entry("a variation selector at the end", func(r string) string { return r + "\ufe0f" }),
		Entry("a combining grapheme joiner inside", func(r string) string { return r[:3] + "\u034f" + r[3:] }),
		Entry("a Hangul filler at the end", func(r string) string { return r + "\u3164" }),
		Entry("a halfwidth Hangul filler at the start", func(r string) string { return "\uffa0" + r }),
		Entry("a Mongolian free variation selector at the end", func(r string) string { return r + "\u180b" }),
		Entry("a Braille blank at the end", func(r string) string { return r + "\u2800" }),
		Entry("a variation selector supplement at the end", func(r string) string { return r + "\U000e0100" }),
	)
})

var _ = Describe("Top-ups made before the reference rules", func() {
	// Checked, holds: the reference rules refuse references the schema took before (a variation
	// selector, a Hangul filler). A PointTopUp made before the upgrade with such a reference,
	// not yet applied (its account not there yet, or the manager down during the upgrade),
	// must still get its status written, or it would never be recorded applied: its journal
	// entry would stay, and its account could never close. The kube-apiserver's validation
	// ratcheting (beta and on by default since 1.30, the chart needs 1.32) skips rules of
	// fields an update does not change. A throwaway CRD with status subresource stands in for
	// PointTopUp: its object is made before the rules of the real CRD's spec.reference are
	// added, as an upgrade does.
	It("still writes the status of a top-up whose reference the new rules refuse", func() {
		raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "videogen.dev_pointtopups.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var real map[string]any
		Expect(yaml.Unmarshal(raw, &real)).To(Succeed())
		versions, _, _ := unstructured.NestedSlice(real, "spec", "versions")
		rules, found, err := unstructured.NestedSlice(versions[0].(map[string]any),
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "reference", "x-kubernetes-validations")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())

		schema := func(withRules bool) map[string]any {
			ref := map[string]any{"type": "string", "minLength": int64(1), "maxLength": int64(128)}
			if withRules {
				ref["x-kubernetes-validations"] = rules
			}
			return map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
				"spec":   map[string]any{"type": "object", "properties": map[string]any{"reference": ref}},
				"status": map[string]any{"type": "object", "properties": map[string]any{"applied": map[string]any{"type": "boolean"}}},
			}}}
		}
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "ratchets.adv20.videogen.dev"},
			"spec": map[string]any{
				"group": "adv20.videogen.dev", "scope": "Namespaced",
				"names": map[string]any{"plural": "ratchets", "singular": "ratchet", "kind": "Ratchet", "listKind": "RatchetList"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": schema(false),
					"subresources": map[string]any{"status": map[string]any{}}}},
			},
		}}
		Expect(k8sClient.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, crd) })
		obj := func(name, ref string) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "adv20.videogen.dev/v1", "kind": "Ratchet",
				"metadata": map[string]any{"namespace": "default", "name": name},
				"spec":     map[string]any{"reference": ref},
			}}
		}
		old := obj(envsuite.Unique("old"), "INV-1\ufe0f")
		Eventually(func() error { return k8sClient.Create(ctx, old) }, 20*time.Second).Should(Succeed())

		// The upgrade: the rules come.
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		v := crd.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
		v["schema"] = schema(true)
		Expect(k8sClient.Update(ctx, crd)).To(Succeed())
		Eventually(func() string {
			err := k8sClient.Create(ctx, obj(envsuite.Unique("new"), "INV-1\ufe0f"), client.DryRunAll)
			if err == nil {
				return ""
			}
			return err.Error()
		}, 20*time.Second).Should(ContainSubstring("reference must not contain control or invisible characters"))

		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), old)).To(Succeed())
		Expect(unstructured.SetNestedField(old.Object, true, "status", "applied")).To(Succeed())
		Expect(k8sClient.Status().Update(ctx, old)).To(Succeed())
		old.SetLabels(map[string]string{"audited": "yes"})
		Expect(k8sClient.Update(ctx, old)).To(Succeed())
	})
})
