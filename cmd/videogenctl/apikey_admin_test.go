package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// apikey create refuses a key for an account whose namespace is being deleted. Interleaving:
// 1. acme's namespace is deleted with its account still there (it stays Terminating: envtest
// runs no namespace controller, as a cluster whose account still holds points keeps it).
// 2. An administrator runs apikey create --account acme for the customer. Before the fix the key
// was issued and shown as any other: every task it submitted was refused (403 create_refused,
// Kubernetes makes nothing in a namespace being deleted), and it stopped working once the
// namespace went. Now it is refused, saying the namespace is being deleted, and no key is stored;
// and account show says the namespace is being deleted.
func TestAPIKeyCreateRefusesANamespaceBeingDeletedAndAccountShowSaysSo(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}
	if err := c.Create(ctx, acct); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, namespace(&metav1.ObjectMeta{Name: "acme"})); err != nil { // step 1
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &ns); err != nil || ns.DeletionTimestamp.IsZero() {
		t.Fatalf("namespace acme is not kept Terminating: %v", err)
	}
	var out bytes.Buffer
	err := run(ctx, []string{"apikey", "create", "--account", "acme", "--kubeconfig", kubeconfig}, &out) // step 2
	if err == nil || !strings.Contains(err.Error(), `namespace "acme" is being deleted`) || strings.Contains(out.String(), "vg_") {
		t.Errorf("apikey create for a namespace being deleted: %v\n%s; want refused, saying the namespace is being deleted", err, out.String())
	}
	if keys, err := apikeys.List(ctx, c, "videogen-system", "acme"); err != nil || len(keys) != 0 {
		t.Errorf("keys of acme: %d (%v); want none stored", len(keys), err)
	}

	// account show says so too: its READY said True (Active) and nothing else, as if the account
	// could go on, while no debit to close it can be made there (docs/ledger.md).
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	out.Reset()
	if err := run(ctx, []string{"account", "show", "acme", "--kubeconfig", kubeconfig}, &out); err != nil ||
		!strings.Contains(note.String(), `Namespace "acme" is being deleted: it stays Terminating while its account has points`) {
		t.Errorf("account show of an account whose namespace is being deleted: %v, said %q", err, note.String())
	}
	out.Reset()
	if err := run(ctx, []string{"account", "show", "acme", "-o", "json", "--kubeconfig", kubeconfig}, &out); err != nil ||
		!strings.Contains(out.String(), `"namespaceDeleting": true`) {
		t.Errorf("account show -o json of an account whose namespace is being deleted: %v\n%s", err, out.String())
	}
}

// apikey list of an account that does not exist says so, as task list does. Before the fix it
// said "No API keys of account "acmee" found in namespace "videogen-system"; if the operator
// runs in another namespace, name it with --key-namespace": for a typo in the account's name,
// it sent the administrator looking for the operator elsewhere.
func TestAPIKeyListOfNoAccountSaysSo(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}
	if err := c.Create(ctx, acct); err != nil {
		t.Fatal(err)
	}
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	for account, want := range map[string]string{
		"acmee": `No API keys found: there is no account "acmee".`,
		"acme":  `No API keys of account "acme" found in namespace "videogen-system"`,
	} {
		note.Reset()
		var out bytes.Buffer
		if err := run(ctx, []string{"apikey", "list", "-n", account, "--kubeconfig", kubeconfig}, &out); err != nil {
			t.Fatalf("apikey list -n %s: %v", account, err)
		}
		if !strings.Contains(note.String(), want) {
			t.Errorf("apikey list -n %s says %q; want %q", account, note.String(), want)
		}
	}
}

// connectors that finds no connector Secret says where it looked, as apikey list does. Before,
// `connectors --key-namespace nope` printed six connectors "false" and nothing else: the reason
// (no such namespace) was only in -o json's problem fields.
func TestConnectorsWithoutSecretsSaysWhereItLooked(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	for namespace, want := range map[string]string{
		"nope":            `No connector Secrets found: there is no namespace "nope"; if the operator runs in another namespace, name it with --key-namespace.`,
		"videogen-system": `No connector Secrets found in namespace "videogen-system"; if the operator runs in another namespace`,
	} {
		note.Reset()
		var out bytes.Buffer
		if err := run(ctx, []string{"connectors", "--key-namespace", namespace, "--kubeconfig", kubeconfig}, &out); err != nil {
			t.Fatalf("connectors --key-namespace %s: %v", namespace, err)
		}
		if !strings.Contains(note.String(), want) || !strings.Contains(out.String(), "stripe") {
			t.Errorf("connectors --key-namespace %s printed %q and said %q; want the table and %q", namespace, out.String(), note.String(), want)
		}
	}
}
