package webhooksecrets

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// During a rotation both secrets sign; once the overlap ends only the new one does.
func TestSigningUsesThePreviousSecretOnlyDuringTheOverlap(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := withAccount()
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system", Clock: clocktesting.NewFakePassiveClock(now)}

	first, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := first.Signing(now); len(got) != 1 || got[0] != first.Current {
		t.Fatalf("before any rotation Signing = %v, want the one secret", got)
	}
	again, err := s.Ensure(ctx, "acme")
	if err != nil || again.Current != first.Current {
		t.Fatalf("Ensure is not stable: %v, %v", again, err)
	}

	rotated, err := s.Rotate(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Current == first.Current || rotated.Previous != first.Current {
		t.Fatalf("after rotation current=%q previous=%q, want a new current and the old one as previous", rotated.Current, rotated.Previous)
	}
	if rotated.PreviousExpiresAt == nil || !rotated.PreviousExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("previous expires at %v, want %v", rotated.PreviousExpiresAt, now.Add(time.Hour))
	}
	for _, tc := range []struct {
		at   time.Time
		want []string
	}{
		{now, []string{rotated.Current, first.Current}},
		{now.Add(59 * time.Minute), []string{rotated.Current, first.Current}},
		{now.Add(time.Hour), []string{rotated.Current}},
		{now.Add(48 * time.Hour), []string{rotated.Current}},
	} {
		got := rotated.Signing(tc.at)
		if len(got) != len(tc.want) || got[0] != tc.want[0] || (len(got) == 2 && got[1] != tc.want[1]) {
			t.Errorf("Signing(%v) = %v, want %v", tc.at.Sub(now), got, tc.want)
		}
	}

	// What the store reads back is what Rotate returned.
	read, err := s.Ensure(ctx, "acme")
	if err != nil || read.Current != rotated.Current || read.Previous != first.Current || !read.PreviousExpiresAt.Equal(*rotated.PreviousExpiresAt) {
		t.Fatalf("read back %+v (%v), want %+v", read, err, rotated)
	}

	// A second rotation (or a retry after a 409) half an hour later does not cut the first
	// secret's overlap short: receivers still on it keep verifying until it ends.
	s.Clock = clocktesting.NewFakePassiveClock(now.Add(30 * time.Minute))
	third, err := s.Rotate(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if third.Previous != rotated.Current {
		t.Fatalf("previous %q, want the secret the second rotation replaced", third.Previous)
	}
	if got, want := third.Signing(now.Add(45*time.Minute)), []string{third.Current, rotated.Current, first.Current}; !slices.Equal(got, want) {
		t.Errorf("Signing 45 minutes in = %v, want %v (all three)", got, want)
	}
	if got, want := third.Signing(now.Add(61*time.Minute)), []string{third.Current, rotated.Current}; !slices.Equal(got, want) {
		t.Errorf("Signing after the first overlap = %v, want %v", got, want)
	}
	read, err = s.Ensure(ctx, "acme")
	if err != nil || !slices.Equal(read.Signing(now.Add(45*time.Minute)), third.Signing(now.Add(45*time.Minute))) {
		t.Fatalf("read back %+v (%v), want %+v", read, err, third)
	}
}

// A client that rotates in a loop signs its deliveries with at most eleven secrets: the current
// one and the last ten replaced.
func TestRotationsKeepAtMostTenReplacedSecrets(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := withAccount()
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system", Clock: clocktesting.NewFakePassiveClock(now)}
	var last Secrets
	for range 15 {
		var err error
		if last, err = s.Rotate(ctx, "acme", 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(last.Signing(now)); got != 11 {
		t.Fatalf("%d secrets sign, want 11", got)
	}
}

// A rotation that loses the compare-and-swap is not retried: a retry would replace the secret
// the winner just handed out.
func TestARotationThatLosesTheRaceIsRefusedNotRetried(t *testing.T) {
	ctx := context.Background()
	base := withAccount()
	updates := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			// Another rotation wrote first.
			return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, obj.GetName(), errors.New("the object has been modified"))
		},
	})
	s := &Store{Client: c, Reader: base, Namespace: "videogen-system"}
	before, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rotate(ctx, "acme", time.Hour); !errors.Is(err, ErrConcurrentRotation) {
		t.Fatalf("Rotate = %v, want ErrConcurrentRotation", err)
	}
	if updates != 1 {
		t.Fatalf("Rotate tried %d updates, want 1", updates)
	}
	after, err := s.Ensure(ctx, "acme")
	if err != nil || after.Current != before.Current || after.Previous != "" {
		t.Fatalf("the secret changed: %+v (%v), want %+v", after, err, before)
	}
}

// A rotation whose write landed but answered an error (the kube-apiserver's 504, a connection
// dropped after the request was sent) returns the secret it stored: told an error, the caller
// would not learn the secret now signing, and its retry would rotate once more. One that did
// not land is an error, and the secret is unchanged.
func TestARotationThatLandedButAnsweredAnErrorReturnsItsSecret(t *testing.T) {
	ctx := context.Background()
	base := withAccount()
	land := false
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if land {
				if err := c.Update(ctx, obj, opts...); err != nil {
					return err
				}
			}
			return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
		},
	})
	s := &Store{Client: c, Reader: base, Namespace: "videogen-system"}
	before, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rotate(ctx, "acme", time.Hour); err == nil {
		t.Fatal("Rotate whose write did not land returned no error")
	}
	if now, err := s.Ensure(ctx, "acme"); err != nil || now.Current != before.Current {
		t.Fatalf("the secret changed though the rotation did not land: %+v (%v)", now, err)
	}
	land = true
	rotated, err := s.Rotate(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatalf("Rotate whose write landed: %v, want the secret it stored", err)
	}
	stored, err := s.Ensure(ctx, "acme")
	if err != nil || rotated.Current != stored.Current || rotated.Current == before.Current || rotated.Previous != before.Current {
		t.Fatalf("Rotate returned %+v; stored %+v (%v); want the stored rotation, the one before as previous", rotated, stored, err)
	}
}

// withAccount is a fake cluster with the namespace of account "acme" (UID "uid-acme") and objs.
func withAccount(objs ...client.Object) client.WithWatch {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "uid-acme",
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))}}
	return fake.NewClientBuilder().WithObjects(append(objs, ns)...).Build()
}

// formerSecret is the Secret of acme as a namespace "acme" deleted before left it: made for
// namespace UID uid (none: made before the annotation) at created, a rotation's overlap running.
func formerSecret(uid string, created time.Time, current, previous, older string) *corev1.Secret {
	olderJSON, _ := json.Marshal([]Retired{{Secret: older, ExpiresAt: created.Add(1000 * time.Hour)}})
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: SecretName("acme"),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{LabelSigning: "true", LabelAccount: "acme"},
			Annotations:       map[string]string{AnnotationPreviousExpiresAt: created.Add(1000 * time.Hour).Format(time.RFC3339)}},
		Data: map[string][]byte{keyCurrent: []byte(current), keyPrevious: []byte(previous), keyOlder: olderJSON},
	}
	if uid != "" {
		sec.Annotations[AnnotationAccountUID] = uid
	}
	return sec
}

// storedSecret is acme's Secret as stored.
func storedSecret(t *testing.T, c client.Reader) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "videogen-system", Name: SecretName("acme")}, sec); err != nil {
		t.Fatal(err)
	}
	return sec
}

// expectFresh fails unless got is one new secret, none of old among what signs, and the stored
// Secret is it, marked as acme's namespace's.
func expectFresh(t *testing.T, c client.Reader, got Secrets, old ...string) {
	t.Helper()
	signing := got.Signing(time.Now())
	for _, o := range old {
		if slices.Contains(signing, o) {
			t.Fatalf("signing with %v, which holds %q of the namespace acme before", signing, o)
		}
	}
	if len(signing) != 1 || got.Previous != "" || got.PreviousExpiresAt != nil || len(got.Older) != 0 {
		t.Fatalf("Ensure = %+v, want one new secret and nothing previous", got)
	}
	sec := storedSecret(t, c)
	if string(sec.Data[keyCurrent]) != got.Current || sec.Annotations[AnnotationAccountUID] != "uid-acme" ||
		sec.Annotations[AnnotationPreviousExpiresAt] != "" || len(sec.Data[keyPrevious]) != 0 || len(sec.Data[keyOlder]) != 0 {
		t.Fatalf("stored %v %v, want current %q alone, for uid-acme", sec.Annotations, sec.Data, got.Current)
	}
}

// A namespace "acme" deleted, and one of that name made later for another tenant: the new
// one's deliveries are not signed with (and its GET /v1/webhook-secret does not hand out) the
// secrets the first tenant holds, current or replaced.
func TestTheSecretOfAFormerNamespaceOfTheNameIsReplaced(t *testing.T) {
	ctx := context.Background()
	old := formerSecret("uid-gone", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50", "whsec_old-previous", "whsec_old-older")
	c := withAccount(old)
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system"}
	got, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	expectFresh(t, c, got, "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50", "whsec_old-previous", "whsec_old-older")
	if again, err := s.Ensure(ctx, "acme"); err != nil || again.Current != got.Current {
		t.Fatalf("Ensure again = %+v (%v), want the replacement %q", again, err, got.Current)
	}
}

// A Secret from before the UID annotation: made before the namespace, it was made for an
// earlier namespace of the name and is replaced; made after, it is the namespace's and is kept
// (adopted: the UID written onto it), with its rotation's overlap.
func TestASecretFromBeforeTheAnnotationIsAdoptedOnlyIfMadeAfterTheNamespace(t *testing.T) {
	ctx := context.Background()
	const current = "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50"
	nsCreated := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

	c := withAccount(formerSecret("", nsCreated.Add(-time.Hour), current, "whsec_p", "whsec_o"))
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system"}
	got, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	expectFresh(t, c, got, current, "whsec_p", "whsec_o")

	for _, created := range []time.Time{nsCreated, nsCreated.Add(time.Hour)} {
		c := withAccount(formerSecret("", created, current, "whsec_p", "whsec_o"))
		s := &Store{Client: c, Reader: c, Namespace: "videogen-system"}
		got, err := s.Ensure(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if got.Current != current || got.Previous != "whsec_p" || len(got.Older) != 1 {
			t.Fatalf("made %v after the namespace: Ensure = %+v, want the Secret kept", created.Sub(nsCreated), got)
		}
		if uid := storedSecret(t, c).Annotations[AnnotationAccountUID]; uid != "uid-acme" {
			t.Fatalf("made %v after the namespace: stored UID %q, want uid-acme written onto it", created.Sub(nsCreated), uid)
		}
	}
}

// An account whose namespace does not exist gets an error, and no Secret is made for it (a
// namespace of that name made later would find it).
func TestAnAccountWithoutANamespaceGetsNoSecret(t *testing.T) {
	ctx := context.Background()
	c := withAccount()
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system"}
	for _, call := range []func() error{
		func() error { _, err := s.Ensure(ctx, "gone"); return err },
		func() error { _, err := s.Rotate(ctx, "gone", time.Hour); return err },
	} {
		if err := call(); !errors.Is(err, ErrNoAccount) {
			t.Fatalf("err = %v, want ErrNoAccount", err)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: SecretName("gone")}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Secret was made for an account without a namespace (%v)", err)
	}
}

// Two replicas replace a former namespace's Secret at once: the loser's compare-and-swap meets
// a conflict, it reads again and uses the winner's secret; both hand out the same one.
func TestConcurrentReplacementsAgreeOnOneSecret(t *testing.T) {
	ctx := context.Background()
	const old = "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50"
	base := withAccount(formerSecret("uid-gone", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), old, "whsec_p", "whsec_o"))
	other := &Store{Client: base, Reader: base, Namespace: "videogen-system"}
	var theirs Secrets
	updates := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			if updates == 1 { // the other replica's replacement lands between our read and write
				var err error
				if theirs, err = other.Ensure(ctx, "acme"); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	s := &Store{Client: c, Reader: base, Namespace: "videogen-system"}
	ours, err := s.Ensure(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if ours.Current != theirs.Current || updates != 1 {
		t.Fatalf("the replicas hand out %q and %q after %d updates of ours, want one secret and our one update refused", ours.Current, theirs.Current, updates)
	}
	expectFresh(t, base, ours, old, "whsec_p", "whsec_o")
}

// A replacement the cluster stored but answered an error for (the kube-apiserver's 504): the
// secret it stored is the namespace's now, and neither this Ensure nor a retry replaces it a
// second time (a receiver told the first would reject every delivery).
func TestAReplacementThatLandedButAnsweredAnErrorIsNotRepeated(t *testing.T) {
	ctx := context.Background()
	const old = "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50"
	base := withAccount(formerSecret("uid-gone", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), old, "whsec_p", "whsec_o"))
	updates := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates++
			if err := c.Update(ctx, obj, opts...); err != nil {
				return err
			}
			return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
		},
	})
	s := &Store{Client: c, Reader: base, Namespace: "videogen-system"}
	first, err := s.Ensure(ctx, "acme")
	stored := string(storedSecret(t, base).Data[keyCurrent])
	if err != nil || first.Current != stored {
		t.Fatalf("Ensure = %+v (%v), want the stored replacement %q", first, err, stored)
	}
	again, err := s.Ensure(ctx, "acme")
	if err != nil || again.Current != stored || updates != 1 {
		t.Fatalf("retry: %+v (%v) after %d updates, want %q and one update", again, err, updates, stored)
	}
	expectFresh(t, base, again, old, "whsec_p", "whsec_o")
}

// Rotating the Secret a former namespace of the name left keeps none of that namespace's
// secrets signing (its current one is not made "previous"), and the rotated Secret stays
// marked as the namespace's.
func TestRotatingAFormerNamespacesSecretKeepsNoneOfItsSecrets(t *testing.T) {
	ctx := context.Background()
	const old = "whsec_b2xkY3VycmVudG9sZGN1cnJlbnRvbGRjdXJyZW50"
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	c := withAccount(formerSecret("uid-gone", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), old, "whsec_p", "whsec_o"))
	s := &Store{Client: c, Reader: c, Namespace: "videogen-system", Clock: clocktesting.NewFakePassiveClock(now)}
	rotated, err := s.Rotate(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{old, "whsec_p", "whsec_o"} {
		if slices.Contains(rotated.Signing(now), o) {
			t.Fatalf("the rotation signs with %v, which holds %q of the namespace acme before", rotated.Signing(now), o)
		}
	}
	if uid := storedSecret(t, c).Annotations[AnnotationAccountUID]; uid != "uid-acme" {
		t.Fatalf("stored UID %q after the rotation, want uid-acme", uid)
	}
	// And a rotation of the namespace's own Secret keeps its UID too.
	again, err := s.Rotate(ctx, "acme", time.Hour)
	if err != nil || again.Previous != rotated.Current {
		t.Fatalf("second rotation %+v (%v), want %q as previous", again, err, rotated.Current)
	}
	if uid := storedSecret(t, c).Annotations[AnnotationAccountUID]; uid != "uid-acme" {
		t.Fatalf("stored UID %q after the second rotation, want uid-acme", uid)
	}
}
