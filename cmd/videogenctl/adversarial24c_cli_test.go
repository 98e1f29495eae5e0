package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Adversarial round 24c: videogenctl, the items round 24's CLI review left open.

// account show lists the top-ups of one second newest first, so that its 10-newest cut never
// hides a newer one behind an older one. Input: a billing script runs `videogenctl topup acme
// 5 --reference INV-$n --no-wait` for twelve invoices in a loop (each takes a few tens of
// milliseconds against a nearby cluster), then `account show acme`. The kube-apiserver keeps
// creationTimestamp to the second, so all twelve tie on it and account show orders them by
// name, descending. Before the fix a top-up was named topup-<second>-<random hex>: within the
// second the order was the random part's, so the listing came in random order, and the cut
// to the 10 newest dropped two random ones of the twelve: INV-12, the last invoice, could be
// among the "(2 older: kubectl get pointtopups)" and missing from the list, while INV-1 was
// listed. Now the name carries the milliseconds (topup-<second>-<ms>-<hex>): the top-ups of
// one second sort by the time they were made. Deterministic: the names are topUpName's for
// chosen times and random parts (the random parts chosen in the opposite order of the times,
// the worst case the old names had), all with the same creationTimestamp, in shuffled order.
func TestAdversarial24cTopUpsOfOneSecondAreNewestFirst(t *testing.T) {
	second := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var made []videogenv1alpha1.PointTopUp
	for i := range 12 {
		name := topUpName(second.Add(time.Duration(i*70)*time.Millisecond), [3]byte{byte(255 - i), 0, 0})
		made = append(made, videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(second)},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: "INV-" + string(rune('A'+i))}})
	}
	// One made a second later, another second's top-up: the creationTimestamp decides.
	made = append(made, videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{
		Name: topUpName(second.Add(1500*time.Millisecond), [3]byte{0, 0, 0}), CreationTimestamp: metav1.NewTime(second.Add(time.Second))},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: "INV-later"}})
	for seed := range uint64(20) {
		items := append([]videogenv1alpha1.PointTopUp(nil), made...)
		r := rand.New(rand.NewPCG(seed, 1))
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		newestTopUpsFirst(items)
		var got []string
		for _, it := range items[:recentTopUps] {
			got = append(got, it.Spec.Reference)
		}
		want := []string{"INV-later", "INV-L", "INV-K", "INV-J", "INV-I", "INV-H", "INV-G", "INV-F", "INV-E", "INV-D"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("the %d newest top-ups (shuffle %d): %v; want the newest first: %v (names %v)", recentTopUps, seed, got, want, names(items))
		}
	}
}

func names(items []videogenv1alpha1.PointTopUp) []string {
	var n []string
	for _, it := range items {
		n = append(n, it.Name)
	}
	return n
}
