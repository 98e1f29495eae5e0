// Package apikeys issues, revokes and checks the API keys of the /v1 REST API.
//
// A key maps to one account: the namespace it was issued for, by its UID (AnnotationAccountUID),
// not its name, so a namespace deleted and later made again under that name, for whoever, does
// not take the keys of the first; the manager deletes them once it is gone. Only a SHA-256 of
// the key is stored, in a Secret in the operator's own namespace (so the apiserver needs no
// access to Secrets elsewhere), labelled so that the apiserver caches exactly these Secrets, and
// the namespaces, through informers: checking a key costs no apiserver round trip. Keys are
// 256-bit random, so a fast hash is enough; comparison is in constant time.
//
// Key format: vg_<id>_<secret>, where id (12 hex) names the Secret "apikey-<id>".
package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/accountns"
)

const (
	// LabelAPIKey marks the Secrets that hold API key hashes; the apiserver caches only these.
	LabelAPIKey = "videogen.dev/api-key"
	// LabelAccount names the account (namespace) a key belongs to.
	LabelAccount = "videogen.dev/account"
	// LabelKeyID is the key's public id.
	LabelKeyID = "videogen.dev/api-key-id"
	// AnnotationDescription says what a key is for.
	AnnotationDescription = "videogen.dev/description"
	// AnnotationIssuedAt is when Issue made the key, to the millisecond (RFC 3339, UTC): the
	// kube-apiserver keeps creationTimestamp to the second, and the keys of one second are
	// listed newest first by it.
	AnnotationIssuedAt = "videogen.dev/issued-at"
	// AnnotationAccountUID is the UID of the namespace a key was issued for: the key works only
	// while the namespace named LabelAccount has it.
	AnnotationAccountUID = accountns.Annotation

	dataHash   = "sha256"
	namePrefix = "apikey-"
)

var (
	keyFormat = regexp.MustCompile(`^vg_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$`)
	idFormat  = regexp.MustCompile(`^[0-9a-f]{12}$`)
)

// IDOf is the id of the key s names: its id (12 hex digits, in either case), its Secret's name
// (apikey-<id>) or the key itself (vg_<id>_<secret>), which is what an administrator holding a
// leaked key has to hand. ok is false for anything else.
func IDOf(s string) (id string, ok bool) {
	if m := keyFormat.FindStringSubmatch(s); m != nil {
		return m[1], true
	}
	id = strings.ToLower(strings.TrimPrefix(s, namePrefix))
	return id, idFormat.MatchString(id)
}

// ErrUnknownKey is what Revoke wraps for an id no Secret of the key namespace has.
var ErrUnknownKey = errors.New("unknown key")

// ErrInvalidKey is returned for a missing, malformed, unknown or revoked key. Callers must not
// tell these apart in responses.
var ErrInvalidKey = errors.New("invalid API key")

// Principal is who a valid key speaks for.
type Principal struct {
	Account string // namespace
	KeyID   string
	// AccountUID and AccountCreated are the namespace Account as the key was checked against:
	// an object read for the account, from a cache that may still hold a deleted namespace's of
	// that name, is the account's only if accountns.MadeFor(obj, p.Namespace()) says so. Zero
	// in a Principal not made by Authenticate.
	AccountUID     types.UID
	AccountCreated metav1.Time
}

// Namespace is the account's namespace as far as p knows it (name, UID, creation), for
// accountns.MadeFor.
func (p Principal) Namespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Account, UID: p.AccountUID, CreationTimestamp: p.AccountCreated}}
}

// Key describes an issued key (never its secret); videogenctl apikey list -o json prints it.
type Key struct {
	ID          string    `json:"id"`
	Account     string    `json:"account"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"createdAt"`
	// IssuedAt is AnnotationIssuedAt, the issuer's clock to the millisecond; zero for a key
	// issued before it was written, or whose annotation does not parse.
	IssuedAt time.Time `json:"-"`
	// Orphaned, set by List, says why the key no longer works although it is not revoked: the
	// namespace it was issued for is gone (deleted, maybe made again for someone else).
	Orphaned string `json:"orphaned,omitempty"`
}

// SecretName is the name of the Secret holding key id's hash.
func SecretName(id string) string { return namePrefix + id }

// Issue creates a key for account, the namespace of that name as it is now, and returns it; it
// is shown once and never stored. When there is no such namespace, nothing is created. When the
// Secret's create fails, the key and its Key are returned with the error all the same: a create
// can land and answer an error (a 504 timeout, a dropped connection), and then that key works,
// which Stored tells.
func Issue(ctx context.Context, c client.Client, keyNamespace, account, description string) (string, Key, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: account}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", Key{}, fmt.Errorf("no namespace %q: an API key is issued for an existing namespace; nothing created", account)
		}
		return "", Key{}, fmt.Errorf("reading namespace %q: %w", account, err)
	}
	var idb [6]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", Key{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Key{}, err
	}
	id := hex.EncodeToString(idb[:])
	key := "vg_" + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(key))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SecretName(id),
			Namespace:   keyNamespace,
			Labels:      map[string]string{LabelAPIKey: "true", LabelAccount: account, LabelKeyID: id},
			Annotations: map[string]string{AnnotationDescription: description, AnnotationIssuedAt: time.Now().UTC().Format(issuedAtFormat)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{dataHash: []byte(hex.EncodeToString(sum[:]))},
	}
	accountns.Record(s, &ns)
	if err := c.Create(ctx, s); err != nil {
		return key, keyOf(s), fmt.Errorf("storing API key for account %q: %w", account, err)
	}
	return key, keyOf(s), nil
}

// Stored returns the Key of key when its Secret is in keyNamespace with key's hash (found is
// false when it is not): a key whose Issue answered an error may have been stored all the same.
func Stored(ctx context.Context, c client.Reader, keyNamespace, key string) (k Key, found bool, err error) {
	m := keyFormat.FindStringSubmatch(key)
	if m == nil {
		return Key{}, false, nil
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: keyNamespace, Name: SecretName(m[1])}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Key{}, false, nil
		}
		return Key{}, false, err
	}
	sum := sha256.Sum256([]byte(key))
	if s.Labels[LabelAPIKey] != "true" || !s.DeletionTimestamp.IsZero() ||
		subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), s.Data[dataHash]) != 1 {
		return Key{}, false, nil
	}
	return keyOf(&s), true, nil
}

// Revoke deletes key id (or the key named as IDOf reads it). Revoking an unknown id is an
// error, so typos are noticed; so is anything that is not an id, which no key ever has: saying
// "revoked already" of it would leave the key it meant working.
func Revoke(ctx context.Context, c client.Client, keyNamespace, id string) error {
	given := id
	id, ok := IDOf(given)
	if !ok {
		if strings.HasPrefix(given, "vg_") {
			// Not quoted: it may be most of a key's secret.
			return fmt.Errorf("that is not a whole API key (vg_, its id, _, and 43 characters): give the key's id, 12 hex digits, as apikey list shows")
		}
		return fmt.Errorf("%q is not an API key id: an id is 12 hex digits, as apikey list shows", given)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(id), Namespace: keyNamespace}}
	if err := c.Delete(ctx, s); err != nil {
		if apierrors.IsNotFound(err) {
			// A revoked key leaves nothing behind: a typo and a second revoke look alike.
			return fmt.Errorf("no API key with id %q in namespace %q: it was never issued, or is revoked already (apikey list shows the keys that work): %w",
				id, keyNamespace, ErrUnknownKey)
		}
		return err
	}
	return nil
}

// RevokeAll revokes every key of account, those issued for any namespace of that name, and
// returns the ids it revoked: closing an account revokes its keys, or one left would act for an
// account made later in the namespace. r should read around any cache, so that a key issued a
// moment ago is not missed. A key issued after its list is not revoked (apikey create refuses
// an account being closed). Each delete is of the Secret listed (its UID), and a key revoked
// already, or by a racing call, is no error: a retry after a delete that landed but answered an
// error goes on where it stopped.
func RevokeAll(ctx context.Context, c client.Client, r client.Reader, keyNamespace, account string) ([]string, error) {
	var list corev1.SecretList
	if err := r.List(ctx, &list, client.InNamespace(keyNamespace), client.MatchingLabels{LabelAPIKey: "true", LabelAccount: account}); err != nil {
		return nil, fmt.Errorf("listing the API keys of account %q: %w", account, err)
	}
	var ids []string
	for i := range list.Items {
		s := &list.Items[i]
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return ids, fmt.Errorf("revoking API key %s of account %q: %w", s.Labels[LabelKeyID], account, err)
		}
		ids = append(ids, s.Labels[LabelKeyID])
	}
	return ids, nil
}

// List returns the keys of account ("" for all accounts) not revoked. Those whose namespace is
// gone work no more, but are listed, with Orphaned saying so, until the manager deletes them
// (controllers.OrphanedSecretReconciler) or they are revoked.
func List(ctx context.Context, c client.Reader, keyNamespace, account string) ([]Key, error) {
	sel := client.MatchingLabels{LabelAPIKey: "true"}
	if account != "" {
		sel[LabelAccount] = account
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(keyNamespace), sel); err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(list.Items))
	// Each account's namespace, read once, with a get: the platform admin may not list them.
	namespaces := map[string]*corev1.Namespace{}
	for i := range list.Items {
		s := &list.Items[i]
		// Being deleted is revoked (Authenticate refuses it), though a finalizer keeps it.
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		acct := s.Labels[LabelAccount]
		ns, read := namespaces[acct]
		if !read {
			var err error
			if ns, err = namespaceOf(ctx, c, acct); err != nil {
				return nil, err
			}
			namespaces[acct] = ns
		}
		k := keyOf(s)
		switch {
		case ns == nil:
			k.Orphaned = fmt.Sprintf("namespace %q it was issued for is deleted: the key no longer works; revoke it", acct)
		case !accountns.MadeFor(s, ns):
			k.Orphaned = fmt.Sprintf("namespace %q it was issued for was deleted, and the one of that name now is another: the key no longer works; revoke it", acct)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// namespaceOf is namespace name, or nil when there is none.
func namespaceOf(ctx context.Context, c client.Reader, name string) (*corev1.Namespace, error) {
	if name == "" {
		return nil, nil
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	return &ns, nil
}

// issuedAtFormat is AnnotationIssuedAt's: RFC 3339 with milliseconds, always three digits.
const issuedAtFormat = "2006-01-02T15:04:05.000Z07:00"

func keyOf(s *corev1.Secret) Key {
	issued, _ := time.Parse(time.RFC3339Nano, s.Annotations[AnnotationIssuedAt])
	return Key{ID: s.Labels[LabelKeyID], Account: s.Labels[LabelAccount],
		Description: s.Annotations[AnnotationDescription], CreatedAt: s.CreationTimestamp.UTC(), IssuedAt: issued}
}

// Authenticator checks presented keys against the Secrets and Namespaces visible through Reader
// (an informer cache: the Secrets of the key namespace with LabelAPIKey, and all Namespaces).
type Authenticator struct {
	Reader    client.Reader
	Namespace string
}

// Authenticate returns the principal of a valid key, or ErrInvalidKey.
func (a *Authenticator) Authenticate(ctx context.Context, presented string) (Principal, error) {
	m := keyFormat.FindStringSubmatch(presented)
	if m == nil {
		return Principal{}, ErrInvalidKey
	}
	var s corev1.Secret
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: SecretName(m[1])}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Principal{}, ErrInvalidKey
		}
		return Principal{}, fmt.Errorf("looking up API key: %w", err)
	}
	sum := sha256.Sum256([]byte(presented))
	want := s.Data[dataHash]
	got := []byte(hex.EncodeToString(sum[:]))
	// A Secret being deleted is a revoked key (Revoke deletes it), though a finalizer may keep
	// it in the cache for a while.
	if s.Labels[LabelAPIKey] != "true" || s.Labels[LabelAccount] == "" || !s.DeletionTimestamp.IsZero() ||
		subtle.ConstantTimeCompare(got, want) != 1 {
		return Principal{}, ErrInvalidKey
	}
	// Read after the hash check: an unknown key costs no more. A key whose namespace is gone,
	// or is another of that name now, is no key of any account.
	var ns corev1.Namespace
	if err := a.Reader.Get(ctx, client.ObjectKey{Name: s.Labels[LabelAccount]}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return Principal{}, ErrInvalidKey
		}
		return Principal{}, fmt.Errorf("looking up the namespace of API key: %w", err)
	}
	if !accountns.MadeFor(&s, &ns) {
		return Principal{}, ErrInvalidKey
	}
	return Principal{Account: s.Labels[LabelAccount], KeyID: m[1], AccountUID: ns.UID, AccountCreated: ns.CreationTimestamp}, nil
}
