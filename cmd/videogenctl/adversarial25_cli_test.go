package main

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// Adversarial round 25: videogenctl, the items round 24 left open, then a new review.

// apikey list orders the keys of one second newest first. Input: a rotation script runs
// `videogenctl apikey create --account acme` three times in a row (each a few tens of
// milliseconds against a nearby cluster), then `apikey list -n acme -o json | jq '.[0]'` to
// take the newest, or a person reads the table's first row as the key just issued and
// revokes the others. The kube-apiserver keeps creationTimestamp to the second, so the three
// tie on it, and before the fix they came by their random ids, descending: the first row was
// the newest key only one time in six, and the script kept an old key and revoked the new
// one. Now apikey create writes the millisecond it issued the key in (apikeys.AnnotationIssuedAt,
// as a top-up's name carries it) and the keys of one second are ordered by it; the id stays
// the last word, so the order is total. Deterministic: Secrets as apikey create writes them,
// ids chosen in the opposite order of their times (the worst case the ids gave), all created
// in one second, listed in shuffled order; and Issue's own annotation is checked to be read
// back as the time it issued the key.
func TestAdversarial25APIKeysOfOneSecondAreNewestFirst(t *testing.T) {
	ctx := context.Background()
	second := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	type made struct {
		id, account string
		at          time.Time
		created     time.Time
	}
	keys := []made{
		{"ffffffffffff", "acme", second.Add(40 * time.Millisecond), second},
		{"aaaaaaaaaaaa", "acme", second.Add(320 * time.Millisecond), second},
		{"555555555555", "globex", second.Add(610 * time.Millisecond), second},
		{"000000000000", "acme", second.Add(930 * time.Millisecond), second},
		// A second later by the kube-apiserver's clock: creationTimestamp decides, whatever the
		// issuer's clock said (another administrator's laptop, 2 s behind).
		{"111111111111", "acme", second.Add(-time.Second), second.Add(time.Second)},
		// Issued before apikey create wrote the annotation: after those of its second that have it.
		{"999999999999", "acme", time.Time{}, second},
	}
	want := "111111111111 000000000000 555555555555 aaaaaaaaaaaa ffffffffffff 999999999999"
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 25))
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b := fake.NewClientBuilder().WithScheme(scheme.New())
		for _, k := range keys {
			annotations := map[string]string{apikeys.AnnotationDescription: "key " + k.id}
			if !k.at.IsZero() {
				annotations[apikeys.AnnotationIssuedAt] = k.at.Format("2006-01-02T15:04:05.000Z07:00")
			}
			b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: apikeys.SecretName(k.id),
				CreationTimestamp: metav1.NewTime(k.created), Annotations: annotations,
				Labels: map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: k.account, apikeys.LabelKeyID: k.id}}})
		}
		listed, err := apikeys.List(ctx, b.Build(), "videogen-system", "")
		if err != nil {
			t.Fatal(err)
		}
		newestKeysFirst(listed)
		var got []string
		for _, k := range listed {
			got = append(got, k.ID)
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("apikey list (shuffle %d): %v; want the newest first: %s", seed, got, want)
		}
	}

	// apikey create writes the annotation, and List reads it back as the time it issued the key.
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	before := time.Now().Truncate(time.Millisecond)
	_, issued, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "rotation")
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(issued.ID)}, &s); err != nil {
		t.Fatal(err)
	}
	listed, err := apikeys.List(ctx, c, "videogen-system", "acme")
	if err != nil || len(listed) != 1 || listed[0].IssuedAt.Before(before) || listed[0].IssuedAt.After(after) {
		t.Fatalf("apikey create wrote %s=%q, read back as %+v (%v); want a time in [%s, %s]",
			apikeys.AnnotationIssuedAt, s.Annotations[apikeys.AnnotationIssuedAt], listed, err, before, after)
	}
}
