package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// account create in a namespace an earlier account was closed in says what the new account
// takes over. Interleaving: 1. account acme is used: a top-up applied to it, two tasks, a short
// template, its webhook signing Secret, an API key. 2. It is closed as docs/ledger.md says
// (its PointAccount deleted), the key forgotten, and the namespace stays (only deleting it
// removes the rest). 3. A platform administrator runs `account create acme` for a new
// customer. Before the fix it printed "account "acme" created with 0 points" and nothing else:
// the new account's API keys then listed the earlier customer's tasks and results, replayed
// their Idempotency-Keys, used its templates and read its webhook signing secret (with which
// the earlier customer's receivers verify deliveries), and the forgotten key acted for the new
// account. Now a note on stderr names what is left and how to start clean; -o json is as it
// was. A new namespace, one that was there empty, and one with only the top-ups of an earlier
// account (the audit trail, which the new keys do not reach) get no note (pins).
func TestAccountCreateInALeftNamespaceSaysWhatItTakesOver(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	var notes bytes.Buffer
	stderr = &notes
	t.Cleanup(func() { stderr = os.Stderr })
	path := kubeconfigFor(t, env, envtest.User{Name: "platform-admin"})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	bindAdminRoles(t, ctx, c, "platform-admin", "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	mustCreateNamespace(t, ctx, c, "empty")
	// An earlier account of ns, credited 100 points by a top-up applied to it.
	earlierAccount := func(ns string) *videogenv1alpha1.PointAccount {
		earlier := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
		mustCreate(t, ctx, c, earlier)
		topUp := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "topup-1"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 100, Reference: "INV-1"}}
		mustCreate(t, ctx, c, topUp)
		balance := int64(100)
		topUp.Status = videogenv1alpha1.PointTopUpStatus{AppliedAt: &metav1.Time{Time: time.Now()}, BalanceAfter: &balance, AccountUID: earlier.UID,
			Conditions: []metav1.Condition{{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Credited",
				Message: "credited", LastTransitionTime: metav1.Now()}}}
		if err := c.Status().Update(ctx, topUp); err != nil {
			t.Fatal(err)
		}
		return earlier
	}
	earlier := earlierAccount("acme")
	// ledgeronly: an account closed there left only its top-ups, the audit trail, which stay
	// the namespace's: nothing the new account's keys reach, and no note.
	mustCreateNamespace(t, ctx, c, "ledgeronly")
	if err := c.Delete(ctx, earlierAccount("ledgeronly")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vt-1", "vt-2"} {
		mustCreate(t, ctx, c, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}})
	}
	mustCreate(t, ctx, c, &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "ushort-1"},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "promo", TargetURL: "https://cdn.example.com/t.mp4"}})
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &ns); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: webhooksecrets.SecretName("acme"),
		Labels: map[string]string{"videogen.dev/account": "acme", "videogen.dev/webhook-signing": "true"}},
		StringData: map[string]string{"secret": "whsec_x"}}
	accountns.Record(secret, &ns)
	mustCreate(t, ctx, c, secret)
	_, key, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, earlier); err != nil {
		t.Fatal(err)
	}

	// account show of the closed account pointed nowhere ("no account"): the top-ups, the
	// audit trail of its points, are kept in the namespace, and it says so.
	var out bytes.Buffer
	if err := run(ctx, []string{"account", "show", "acme", "--kubeconfig", path}, &out); err == nil ||
		!strings.Contains(err.Error(), "keeps 1 top-up, 1 of them applied (+100 points") || !strings.Contains(err.Error(), "kubectl get pointtopups -n acme") {
		t.Errorf("account show acme, closed: %v; want it to name the top-up kept", err)
	}
	if err := run(ctx, []string{"account", "show", "globex", "--kubeconfig", path}, &out); err == nil || err.Error() != `no account "globex"` {
		t.Errorf("account show globex, no namespace: %v; want no account \"globex\"", err)
	}
	if err := run(ctx, []string{"account", "create", "acme", "--kubeconfig", path}, &out); err != nil {
		t.Fatalf("account create acme: %v\n%s", err, out.String())
	}
	note := notes.String()
	for _, want := range []string{`namespace "acme" was there already`, "2 task(s)", "1 short template(s)", "1 top-up(s) of earlier accounts",
		"webhook-signing-acme", key.ID, "apikey revoke", "delete it and the namespace"} {
		if !strings.Contains(note, want) {
			t.Errorf("account create acme in the namespace of a closed account: note %q; want it to say %q", note, want)
		}
	}
	if !strings.Contains(out.String(), `account "acme" created`) || strings.Contains(out.String(), "was there already") {
		t.Errorf("account create acme printed %q; want the usual line on stdout, the note on stderr", out.String())
	}

	for _, name := range []string{"empty", "globex", "ledgeronly"} {
		notes.Reset()
		if err := run(ctx, []string{"account", "create", name, "--kubeconfig", path}, &out); err != nil {
			t.Fatalf("account create %s: %v", name, err)
		}
		if notes.Len() != 0 {
			t.Errorf("account create %s (nothing in its namespace): note %q; want none", name, notes.String())
		}
	}
}

func mustCreate(t *testing.T, ctx context.Context, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}
