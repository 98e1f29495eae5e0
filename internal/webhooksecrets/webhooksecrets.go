// Package webhooksecrets keeps each account's signing secret (whsec_…) for completion webhooks.
// The secret lives in a Secret "webhook-signing-<account>" in the operator's namespace, so
// neither the manager nor the apiserver needs access to Secrets in account namespaces. A
// rotation keeps the previous secret valid for an overlap period, and deliveries are signed
// with both meanwhile (Standard Webhooks allows several signatures).
package webhooksecrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

const (
	// LabelSigning marks webhook signing Secrets.
	LabelSigning = "videogen.dev/webhook-signing"
	// LabelAccount names the account a Secret belongs to.
	LabelAccount = "videogen.dev/account"
	// AnnotationPreviousExpiresAt is when the previous secret stops being used.
	AnnotationPreviousExpiresAt = "videogen.dev/previous-expires-at"

	keyCurrent  = "current"
	keyPrevious = "previous"
)

// Secrets is an account's signing material.
type Secrets struct {
	Current           string
	Previous          string
	PreviousExpiresAt *time.Time
}

// Signing returns the secrets to sign with at now: the current one, and the previous one while
// its overlap lasts.
func (s Secrets) Signing(now time.Time) []string {
	out := []string{s.Current}
	if s.Previous != "" && s.PreviousExpiresAt != nil && now.Before(*s.PreviousExpiresAt) {
		out = append(out, s.Previous)
	}
	return out
}

// SecretName is the name of account's signing Secret.
func SecretName(account string) string { return "webhook-signing-" + account }

// Store reads and writes signing Secrets in Namespace. Reader should read around any cache.
type Store struct {
	Client    client.Client
	Reader    client.Reader
	Namespace string
	Clock     clock.PassiveClock // nil: the real clock
}

func (s *Store) now() time.Time {
	if s.Clock != nil {
		return s.Clock.Now()
	}
	return time.Now()
}

// Ensure returns account's secrets, creating a first secret if there is none.
func (s *Store) Ensure(ctx context.Context, account string) (Secrets, error) {
	sec := &corev1.Secret{}
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: SecretName(account)}, sec)
	if err == nil {
		return decode(sec)
	}
	if !apierrors.IsNotFound(err) {
		return Secrets{}, fmt.Errorf("reading the webhook secret of account %q: %w", account, err)
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: SecretName(account),
			Labels: map[string]string{LabelSigning: "true", LabelAccount: account}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{keyCurrent: []byte(standardwebhooks.NewSecret())},
	}
	if err := s.Client.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) { // created concurrently: use that one
			return s.Ensure(ctx, account)
		}
		return Secrets{}, fmt.Errorf("creating the webhook secret of account %q: %w", account, err)
	}
	return decode(sec)
}

// ErrConcurrentRotation means another rotation of the account's secret won: retrying would
// replace the secret that one just handed out, so the caller is told instead.
var ErrConcurrentRotation = errors.New("the webhook secret was rotated by another request at the same time")

// Rotate makes a new current secret and keeps the old one valid for overlap. It is one
// compare-and-swap on the Secret: of concurrent rotations one wins and the others get
// ErrConcurrentRotation, so every secret Rotate returns was in force when it returned and the
// previous one is what callers had before.
func (s *Store) Rotate(ctx context.Context, account string, overlap time.Duration) (Secrets, error) {
	if _, err := s.Ensure(ctx, account); err != nil {
		return Secrets{}, err
	}
	sec := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: SecretName(account)}, sec); err != nil {
		return Secrets{}, fmt.Errorf("reading the webhook secret of account %q: %w", account, err)
	}
	expires := s.now().Add(overlap).UTC().Truncate(time.Second)
	sec.Data[keyPrevious] = sec.Data[keyCurrent]
	sec.Data[keyCurrent] = []byte(standardwebhooks.NewSecret())
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[AnnotationPreviousExpiresAt] = expires.Format(time.RFC3339)
	if err := s.Client.Update(ctx, sec); err != nil {
		if apierrors.IsConflict(err) {
			return Secrets{}, fmt.Errorf("account %q: %w", account, ErrConcurrentRotation)
		}
		return Secrets{}, fmt.Errorf("rotating the webhook secret of account %q: %w", account, err)
	}
	return decode(sec)
}

func decode(sec *corev1.Secret) (Secrets, error) {
	out := Secrets{Current: string(sec.Data[keyCurrent]), Previous: string(sec.Data[keyPrevious])}
	if _, err := standardwebhooks.DecodeSecret(out.Current); err != nil {
		return Secrets{}, fmt.Errorf("secret %s/%s: %w", sec.Namespace, sec.Name, err)
	}
	if v := sec.Annotations[AnnotationPreviousExpiresAt]; v != "" && out.Previous != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return Secrets{}, errors.New("secret " + sec.Name + ": bad " + AnnotationPreviousExpiresAt)
		}
		out.PreviousExpiresAt = &t
	}
	return out, nil
}
