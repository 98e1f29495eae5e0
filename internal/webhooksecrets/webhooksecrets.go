// Package webhooksecrets keeps each account's signing secret (whsec_…) for completion webhooks.
// The secret lives in a Secret "webhook-signing-<account>" in the operator's namespace, so
// neither the manager nor the apiserver needs access to Secrets in account namespaces. It
// belongs to the namespace, not the name: it records the namespace's UID, and a namespace of
// the same name made later (another tenant) gets a new secret, none of the old ones, and the
// manager deletes it once its namespace is gone (controllers.OrphanedSecretReconciler). A
// rotation keeps the replaced secret valid for an overlap period, and deliveries are signed
// with every secret still valid (Standard Webhooks allows several signatures): a second
// rotation, or a retry after a 409, does not cut the overlap of the one before short.
package webhooksecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

const (
	// LabelSigning marks webhook signing Secrets.
	LabelSigning = "videogen.dev/webhook-signing"
	// LabelAccount names the account a Secret belongs to.
	LabelAccount = "videogen.dev/account"
	// AnnotationPreviousExpiresAt is when the previous secret stops being used.
	AnnotationPreviousExpiresAt = "videogen.dev/previous-expires-at"
	// AnnotationAccountUID is the UID of the namespace the secret was made for: a namespace
	// of the same name made later (another tenant) is not given it.
	AnnotationAccountUID = accountns.Annotation

	keyCurrent  = "current"
	keyPrevious = "previous"
	// keyOlder holds the secrets replaced before the previous one whose overlap had not ended
	// at the last rotation, newest first, as JSON.
	keyOlder = "older"

	// maxOlder bounds keyOlder: with the previous secret, the last 10 replaced secrets sign
	// during their overlap, so a client that rotates in a loop cannot grow every delivery.
	maxOlder = 9
)

// Secrets is an account's signing material.
type Secrets struct {
	Current           string
	Previous          string // the secret the last rotation replaced
	PreviousExpiresAt *time.Time
	// Older are secrets replaced before Previous, newest first, each valid until its ExpiresAt.
	Older []Retired
}

// Retired is a replaced secret and the end of its overlap.
type Retired struct {
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Signing returns the secrets to sign with at now: the current one, and every replaced one
// while its overlap lasts.
func (s Secrets) Signing(now time.Time) []string {
	out := []string{s.Current}
	for _, r := range s.retired() {
		if now.Before(r.ExpiresAt) {
			out = append(out, r.Secret)
		}
	}
	return out
}

// retired lists Previous and Older, newest first.
func (s Secrets) retired() []Retired {
	var out []Retired
	if s.Previous != "" && s.PreviousExpiresAt != nil {
		out = append(out, Retired{Secret: s.Previous, ExpiresAt: *s.PreviousExpiresAt})
	}
	return append(out, s.Older...)
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

// Ensure returns account's secrets, creating a first secret if there is none. The Secret is
// the namespace's, not the name's: one made for an earlier namespace of the name (another
// tenant's, deleted since) is replaced by a fresh secret, keeping none of its secrets.
func (s *Store) Ensure(ctx context.Context, account string) (Secrets, error) {
	sec, err := s.ensure(ctx, account)
	if err != nil {
		return Secrets{}, err
	}
	return decode(sec)
}

// ensure returns account's Secret as stored, made or replaced for its namespace if need be.
// Every write is a compare-and-swap; after a conflict it reads again, so replicas ensuring at
// once agree on one secret.
func (s *Store) ensure(ctx context.Context, account string) (*corev1.Secret, error) {
	ns := &corev1.Namespace{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Name: account}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("account %q: %w", account, ErrNoAccount)
		}
		return nil, fmt.Errorf("reading the namespace of account %q: %w", account, err)
	}
	key := client.ObjectKey{Namespace: s.Namespace, Name: SecretName(account)}
	var out *corev1.Secret
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		sec := &corev1.Secret{}
		err := s.Reader.Get(ctx, key, sec)
		switch {
		case apierrors.IsNotFound(err):
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque}
			fresh(sec, account, ns)
			err = s.Client.Create(ctx, sec)
		case err != nil:
			return err
		case accountns.MadeFor(sec, ns) && accountns.Recorded(sec):
		case accountns.MadeFor(sec, ns):
			// Made before the annotation existed, for this namespace: adopt it.
			accountns.Record(sec, ns)
			err = s.Client.Update(ctx, sec)
		default:
			// Made for an earlier namespace of the name: none of its secrets may sign for
			// this one. Replaced in place, with the resourceVersion read.
			fresh(sec, account, ns)
			err = s.Client.Update(ctx, sec)
		}
		if err != nil && !retriable(err) {
			// A write the cluster stored but answered an error for (a 504): what is stored
			// for this namespace is used, and not replaced a second time.
			stored := &corev1.Secret{}
			if s.Reader.Get(ctx, key, stored) == nil && accountns.Recorded(stored) && accountns.MadeFor(stored, ns) {
				sec, err = stored, nil
			}
		}
		out = sec
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensuring the webhook secret of account %q: %w", account, err)
	}
	return out, nil
}

// fresh makes sec a first secret of namespace ns: a new current one, nothing replaced.
func fresh(sec *corev1.Secret, account string, ns *corev1.Namespace) {
	sec.Labels = map[string]string{LabelSigning: "true", LabelAccount: account}
	delete(sec.Annotations, AnnotationPreviousExpiresAt)
	accountns.Record(sec, ns)
	sec.Data = map[string][]byte{keyCurrent: []byte(standardwebhooks.NewSecret())}
}

// ErrNoAccount means the account's namespace does not exist: it has no secret.
var ErrNoAccount = errors.New("the account's namespace does not exist")

// ErrConcurrentRotation means another rotation of the account's secret won: retrying would
// replace the secret that one just handed out, so the caller is told instead.
var ErrConcurrentRotation = errors.New("the webhook secret was rotated by another request at the same time")

// Rotate makes a new current secret and keeps the old one valid for overlap. It is one
// compare-and-swap on the Secret: of concurrent rotations one wins and the others get
// ErrConcurrentRotation, so every secret Rotate returns was in force when it returned and the
// previous one is what callers had before.
func (s *Store) Rotate(ctx context.Context, account string, overlap time.Duration) (Secrets, error) {
	// The Secret as ensure read or wrote it: the namespace's (its UID annotation is kept),
	// and the compare-and-swap below is against that version.
	sec, err := s.ensure(ctx, account)
	if err != nil {
		return Secrets{}, err
	}
	before, err := decode(sec)
	if err != nil {
		return Secrets{}, err
	}
	now := s.now()
	var older []Retired
	for _, r := range before.retired() {
		if now.Before(r.ExpiresAt) && len(older) < maxOlder {
			older = append(older, r)
		}
	}
	olderJSON, err := json.Marshal(older)
	if err != nil {
		return Secrets{}, err
	}
	sec.Data[keyOlder] = olderJSON
	expires := now.Add(overlap).UTC().Truncate(time.Second)
	sec.Data[keyPrevious] = sec.Data[keyCurrent]
	sec.Data[keyCurrent] = []byte(standardwebhooks.NewSecret())
	metav1.SetMetaDataAnnotation(&sec.ObjectMeta, AnnotationPreviousExpiresAt, expires.Format(time.RFC3339))
	if err := s.Client.Update(ctx, sec); err != nil {
		if apierrors.IsConflict(err) {
			return Secrets{}, fmt.Errorf("account %q: %w", account, ErrConcurrentRotation)
		}
		if landed, ok := s.rotationLanded(ctx, sec); ok {
			return landed, nil
		}
		return Secrets{}, fmt.Errorf("rotating the webhook secret of account %q: %w", account, err)
	}
	return decode(sec)
}

// rotationLanded is the secrets as stored when the rotation of sec that failed (a 504 "request
// did not complete within requested timeout", a connection dropped after the request was sent)
// landed all the same: the stored current secret is the one this rotation made (random, so no
// other rotation's). Told an error instead, the caller would not learn the secret now signing,
// and its retry would rotate once more.
func (s *Store) rotationLanded(ctx context.Context, sec *corev1.Secret) (Secrets, bool) {
	stored := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(sec), stored); err != nil ||
		string(stored.Data[keyCurrent]) != string(sec.Data[keyCurrent]) {
		return Secrets{}, false
	}
	out, err := decode(stored)
	return out, err == nil
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
	if raw := sec.Data[keyOlder]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.Older); err != nil {
			return Secrets{}, fmt.Errorf("secret %s/%s: bad %s: %w", sec.Namespace, sec.Name, keyOlder, err)
		}
	}
	return out, nil
}
