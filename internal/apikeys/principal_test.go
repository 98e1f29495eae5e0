package apikeys_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// The principal names the namespace the key was checked against, by UID and creation: what the
// REST apiserver judges the account's cached objects by (accountns.MadeFor).
func TestAPrincipalNamesTheNamespaceItsKeyWasCheckedAgainst(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(namespace("acme", "uid-a", t0)).Build()
	key, _, err := apikeys.Issue(ctx, c, keyNS, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&apikeys.Authenticator{Reader: c, Namespace: keyNS}).Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ns := p.Namespace()
	if ns.Name != "acme" || ns.UID != "uid-a" || !ns.CreationTimestamp.Time.Equal(t0) {
		t.Errorf("the principal's namespace: %q %q %v; want acme, uid-a, %v", ns.Name, ns.UID, ns.CreationTimestamp, t0)
	}
}
