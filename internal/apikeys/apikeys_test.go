package apikeys_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

const keyNS = "videogen-system"

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func namespace(name, uid string, created time.Time) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}}
}

// recreate deletes namespace name and makes another of that name, with uid: a tenant's
// namespace deleted and, later, one of the same name made for someone else.
func recreate(t *testing.T, c client.Client, name, uid string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, namespace(name, uid, t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
}

// Issue refuses an account that is no namespace, creating nothing: a key for it would belong to
// whoever is given a namespace of that name later.
func TestIssueRefusesAnAccountWithoutANamespace(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	key, _, err := apikeys.Issue(context.Background(), c, keyNS, "acme", "test")
	if err == nil || !strings.Contains(err.Error(), `no namespace "acme"`) || key != "" {
		t.Fatalf("Issue for a missing namespace: key %q, error %v; want no key and an error saying there is no namespace \"acme\"", key, err)
	}
	var secrets corev1.SecretList
	if err := c.List(context.Background(), &secrets); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("Secrets after the refusal: %v %v; want none", secrets.Items, err)
	}
}

// Interleaving: 1. a key is issued for namespace acme (tenant A). 2. acme is deleted, its
// account emptied, and the key forgotten, not revoked. 3. a namespace acme is made for tenant
// B. 4. A's key is presented. It was accepted as B's account; it is refused now, as it is when
// acme is simply gone, and a key issued for B's acme works.
func TestAKeyDoesNotWorkForANamespaceReCreatedUnderItsName(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(namespace("acme", "uid-a", t0)).Build()
	auth := &apikeys.Authenticator{Reader: c, Namespace: keyNS}
	keyA, _, err := apikeys.Issue(ctx, c, keyNS, "acme", "tenant A")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := auth.Authenticate(ctx, keyA); err != nil || p.Account != "acme" {
		t.Fatalf("the key in its own namespace: %v %v", p, err)
	}

	recreate(t, c, "acme", "uid-b")
	if p, err := auth.Authenticate(ctx, keyA); !errors.Is(err, apikeys.ErrInvalidKey) {
		t.Errorf("tenant A's key after acme was re-created for B: %+v, %v; want ErrInvalidKey", p, err)
	}
	keyB, _, err := apikeys.Issue(ctx, c, keyNS, "acme", "tenant B")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := auth.Authenticate(ctx, keyB); err != nil || p.Account != "acme" {
		t.Errorf("a key issued for the new acme: %+v %v; want it to work", p, err)
	}

	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}); err != nil {
		t.Fatal(err)
	}
	if p, err := auth.Authenticate(ctx, keyB); !errors.Is(err, apikeys.ErrInvalidKey) {
		t.Errorf("a key whose namespace is gone: %+v, %v; want ErrInvalidKey", p, err)
	}
}

// A key issued before Issue recorded its namespace's UID has only its creationTimestamp to go
// by: it works if its namespace is no newer than it.
func TestAKeyWithoutTheNamespaceUIDWorksOnlyIfNoOlderThanItsNamespace(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		created time.Time // the key Secret's creationTimestamp
		works   bool
	}{
		{"made after its namespace", t0.Add(time.Minute), true},
		{"made in its namespace's second", t0, true},
		{"made before its namespace", t0.Add(-time.Second), false},
	} {
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(namespace("acme", "uid-a", t0)).Build()
		key, _, err := apikeys.Issue(ctx, c, keyNS, "acme", "old")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := apikeys.IDOf(key)
		// As the key was stored before this version: no UID annotation.
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: keyNS, Name: apikeys.SecretName(id)}, &s); err != nil {
			t.Fatal(err)
		}
		delete(s.Annotations, apikeys.AnnotationAccountUID)
		s.CreationTimestamp = metav1.NewTime(tc.created)
		c = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(namespace("acme", "uid-a", t0), &s).Build()
		_, err = (&apikeys.Authenticator{Reader: c, Namespace: keyNS}).Authenticate(ctx, key)
		if works := err == nil; works != tc.works {
			t.Errorf("a key without the UID annotation %s: error %v; want it to work: %t", tc.name, err, tc.works)
		}
	}
}

// apikey list shows the keys whose namespace is gone or is another now (they no longer work but
// are not revoked, and the administrator must find them to revoke them), saying so, and reads
// each account's namespace once, with a get: the platform admin may not list namespaces.
func TestListMarksKeysWhoseNamespaceIsGone(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(namespace("acme", "uid-a", t0), namespace("globex", "uid-g", t0), namespace("initech", "uid-i", t0)).Build()
	for _, acct := range []string{"acme", "acme", "globex", "initech"} {
		if _, _, err := apikeys.Issue(ctx, c, keyNS, acct, ""); err != nil {
			t.Fatal(err)
		}
	}
	recreate(t, c, "acme", "uid-a2")
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "globex"}}); err != nil {
		t.Fatal(err)
	}

	gets := map[string]int{}
	counting := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				gets[key.Name]++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.NamespaceList); ok {
				t.Error("List listed namespaces: the platform admin may only get them")
			}
			return c.List(ctx, list, opts...)
		},
	})
	keys, err := apikeys.List(ctx, counting, keyNS, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Fatalf("listed %d keys, want all 4: %+v", len(keys), keys)
	}
	for _, k := range keys {
		switch k.Account {
		case "acme", "globex":
			if !strings.Contains(k.Orphaned, "revoke") || !strings.Contains(k.Orphaned, k.Account) {
				t.Errorf("key %s of %s, whose namespace is gone: Orphaned %q; want it to say so and to revoke it", k.ID, k.Account, k.Orphaned)
			}
		default:
			if k.Orphaned != "" {
				t.Errorf("key %s of %s, whose namespace is its own: Orphaned %q; want none", k.ID, k.Account, k.Orphaned)
			}
		}
	}
	if want := map[string]int{"acme": 1, "globex": 1, "initech": 1}; len(gets) != len(want) || gets["acme"] != 1 || gets["globex"] != 1 || gets["initech"] != 1 {
		t.Errorf("namespace gets %v; want one per account %v", gets, want)
	}
}

// RevokeAll revokes every key of one account and no other's, and a delete that lands but
// answers an error (a 504 after the write) fails the call, which, tried again, revokes the rest
// and counts none twice.
func TestRevokeAllRevokesTheAccountsKeysOnlyAndGoesOnAfterAnError(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(namespace("acme", "uid-a", t0), namespace("acme-2", "uid-b", t0)).Build()
	auth := &apikeys.Authenticator{Reader: c, Namespace: keyNS}
	var acme []string
	for range 3 {
		key, _, err := apikeys.Issue(ctx, c, keyNS, "acme", "")
		if err != nil {
			t.Fatal(err)
		}
		acme = append(acme, key)
	}
	other, _, err := apikeys.Issue(ctx, c, keyNS, "acme-2", "")
	if err != nil {
		t.Fatal(err)
	}

	deletes := 0
	landsThenFails := interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			if err := c.Delete(ctx, obj, opts...); err != nil || deletes != 2 {
				return err
			}
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		},
	})
	ids, err := apikeys.RevokeAll(ctx, landsThenFails, c, keyNS, "acme")
	if !apierrors.IsTimeout(err) || len(ids) != 1 {
		t.Fatalf("RevokeAll with the second delete answering a timeout: ids %v, error %v; want the first id and the timeout", ids, err)
	}
	ids, err = apikeys.RevokeAll(ctx, landsThenFails, c, keyNS, "acme")
	if err != nil || len(ids) != 1 {
		t.Fatalf("RevokeAll again: ids %v, error %v; want the one key left", ids, err)
	}
	for i, key := range acme {
		if _, err := auth.Authenticate(ctx, key); !errors.Is(err, apikeys.ErrInvalidKey) {
			t.Errorf("acme's key %d after RevokeAll: %v; want ErrInvalidKey", i, err)
		}
	}
	if p, err := auth.Authenticate(ctx, other); err != nil || p.Account != "acme-2" {
		t.Errorf("acme-2's key after acme's were revoked: %+v, %v; want it to work", p, err)
	}
	if ids, err := apikeys.RevokeAll(ctx, c, c, keyNS, "acme"); err != nil || len(ids) != 0 {
		t.Errorf("RevokeAll of an account without keys: %v, %v; want nothing and no error", ids, err)
	}
}
