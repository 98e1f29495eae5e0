package webhooksecrets

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	c := fake.NewClientBuilder().Build()
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
	c := fake.NewClientBuilder().Build()
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
	base := fake.NewClientBuilder().Build()
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
	base := fake.NewClientBuilder().Build()
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
