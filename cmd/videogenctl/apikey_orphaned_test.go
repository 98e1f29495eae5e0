package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

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
	env, ctx, c := startControlPlane(t)
	path := kubeconfigFor(t, env, envtest.User{Name: "platform-admin"})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	bindAdminRoles(t, ctx, c, "platform-admin", "videogen-system")
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

	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", path), &out)
		return out.String(), err
	}
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
