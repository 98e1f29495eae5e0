package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// apikey list shows the keys whose namespace is gone, saying so, for the administrator to
// revoke them. Interleaving: 1. keys are issued for globex and initech. 2. both namespaces are
// deleted (their accounts closed) and the keys forgotten; a namespace initech is made again,
// for another tenant. 3. A platform administrator (namespaces: get only) runs apikey list. The
// keys no longer work (their namespace is not the one they were issued for); listed as any
// other, nothing told the administrator that, nor that they are left to revoke.
func TestAPIKeyListMarksKeysWhoseNamespaceIsGone(t *testing.T) {
	_, ctx, c, path := asPlatformAdmin(t)
	ids := map[string]string{}
	for _, ns := range []string{"acme", "globex", "initech"} {
		mustCreateNamespace(t, ctx, c, ns)
		_, k, err := apikeys.Issue(ctx, c, "videogen-system", ns, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[ns] = k.ID
	}
	if err := testenv.RemoveNamespace(ctx, c, "globex"); err != nil {
		t.Fatal(err)
	}
	if err := testenv.RemoveNamespace(ctx, c, "initech"); err != nil {
		t.Fatal(err)
	}
	mustCreateNamespace(t, ctx, c, "initech")

	cli := cliWith(ctx, path)
	out, err := cli("apikey", "list")
	if err != nil {
		t.Fatalf("apikey list: %v\n%s", err, out)
	}
	for ns, id := range ids {
		orphaned := regexp.MustCompile(`(?m)^` + id + `\s+` + ns + `\s+\S+\s+namespace gone: revoke`).MatchString(out)
		if orphaned != (ns != "acme") {
			t.Errorf("apikey list, the key of %s marked as its namespace gone: %t; want %t\n%s", ns, orphaned, ns != "acme", out)
		}
	}
	out, err = cli("apikey", "list", "-o", "json")
	var listed []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 3 {
		t.Fatalf("apikey list -o json: %v\n%s; want the 3 keys", err, out)
	}
	for _, k := range listed {
		note, _ := k["orphaned"].(string)
		if (note != "") != (k["account"] != "acme") || (note != "" && !regexp.MustCompile(`namespace ".*revoke it`).MatchString(note)) {
			t.Errorf("apikey list -o json, key of %s: orphaned %q", k["account"], note)
		}
	}
}

// apikey list marks the keys of a closed account whose namespace stays. Interleaving: 1. keys
// are issued for acme, globex and initech, each with its account. 2. globex is closed, but its
// keys are not revoked (no manager runs here; a close revokes them, but not a key issued as it
// closed, nor by a manager from before that): its PointAccount is deleted and gone, the
// namespace stays; initech's PointAccount is deleted and kept by a finalizer (closing). 3. A
// platform administrator runs apikey list to find the keys left to revoke. Before the fix both
// were listed "active", as acme's: nothing said that they belong to a closed account, and they
// still work (tasks and results read, short templates made and changed, the webhook secret
// read and rotated; and they act for an account made later in the namespace). initech's key
// is marked as one its close revokes.
func TestAPIKeyListMarksKeysOfClosedAccounts(t *testing.T) {
	_, ctx, c, path := asPlatformAdmin(t)
	ids := map[string]string{}
	for _, ns := range []string{"acme", "globex", "initech"} {
		mustCreateNamespace(t, ctx, c, ns)
		acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
		if ns == "initech" {
			acct.Finalizers = []string{"test.videogen.dev/hold"}
		}
		if err := c.Create(ctx, acct); err != nil {
			t.Fatal(err)
		}
		_, k, err := apikeys.Issue(ctx, c, "videogen-system", ns, "")
		if err != nil {
			t.Fatal(err)
		}
		ids[ns] = k.ID
		if ns != "acme" {
			if err := c.Delete(ctx, acct); err != nil {
				t.Fatal(err)
			}
		}
	}
	cli := cliWith(ctx, path)
	out, err := cli("apikey", "list")
	if err != nil {
		t.Fatalf("apikey list: %v\n%s", err, out)
	}
	for ns, id := range ids {
		status := map[string]string{"acme": `active`, "globex": `account closed: revoke it`, "initech": `account closing: revoked at its close`}[ns]
		if !regexp.MustCompile(`(?m)^` + id + `\s+` + ns + `\s+\S+\s+` + status).MatchString(out) {
			t.Errorf("apikey list, the key of %s: want STATUS %q\n%s", ns, status, out)
		}
	}
	out, err = cli("apikey", "list", "-o", "json")
	var listed []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 3 {
		t.Fatalf("apikey list -o json: %v\n%s; want the 3 keys", err, out)
	}
	for _, k := range listed {
		note, _ := k["accountClosed"].(string)
		want := map[any]string{"acme": "", "globex": "is closed", "initech": "is being closed"}[k["account"]]
		suffix := map[any]string{"globex": "revoke it", "initech": "until it closes, which revokes the key"}[k["account"]]
		if (note == "") != (want == "") || !strings.Contains(note, want) || !strings.HasSuffix(note, suffix) {
			t.Errorf("apikey list -o json, key of %s: accountClosed %q; want one saying %q", k["account"], note, want)
		}
		if k["orphaned"] != nil {
			t.Errorf("apikey list -o json, key of %s: orphaned %v; its namespace is there", k["account"], k["orphaned"])
		}
	}
}
