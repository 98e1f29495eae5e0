package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// videogenctl: API key order, -o jsonpath and go-template, an account named twice, top-up and
// account-create waits, task watch's exit status.

// apikey list orders the keys of one second newest first. Input: a rotation script runs
// `videogenctl apikey create --account acme` three times in a row (each a few tens of
// milliseconds against a nearby cluster), then `apikey list -n acme -o json | jq '.[0]'` to
// take the newest, or a person reads the table's first row as the key just issued and
// revokes the others. The kube-apiserver keeps creationTimestamp to the second, so the three
// tie on it, and before the fix they came by their random ids, descending: the first row was
// the newest key only one time in six, and the script kept an old key and revoked the new
// one. Now apikey create writes the millisecond it issued the key in (apikeys.AnnotationIssuedAt,
// as a top-up's name carries it) and the keys of one second are ordered by it; the id stays
// the last word, so the order is total. Deterministic: Secrets as apikey create writes them,
// ids chosen in the opposite order of their times (the worst case the ids gave), all created
// in one second, listed in shuffled order; and Issue's own annotation is checked to be read
// back as the time it issued the key.
func TestAPIKeysOfOneSecondAreNewestFirst(t *testing.T) {
	ctx := context.Background()
	second := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	type made struct {
		id, account string
		at          time.Time
		created     time.Time
	}
	keys := []made{
		{"ffffffffffff", "acme", second.Add(40 * time.Millisecond), second},
		{"aaaaaaaaaaaa", "acme", second.Add(320 * time.Millisecond), second},
		{"555555555555", "globex", second.Add(610 * time.Millisecond), second},
		{"000000000000", "acme", second.Add(930 * time.Millisecond), second},
		// A second later by the kube-apiserver's clock: creationTimestamp decides, whatever the
		// issuer's clock said (another administrator's laptop, 2 s behind).
		{"111111111111", "acme", second.Add(-time.Second), second.Add(time.Second)},
		// Issued before apikey create wrote the annotation: after those of its second that have it.
		{"999999999999", "acme", time.Time{}, second},
	}
	want := "111111111111 000000000000 555555555555 aaaaaaaaaaaa ffffffffffff 999999999999"
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 25))
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b := fake.NewClientBuilder().WithScheme(scheme.New())
		for _, k := range keys {
			annotations := map[string]string{apikeys.AnnotationDescription: "key " + k.id}
			if !k.at.IsZero() {
				annotations[apikeys.AnnotationIssuedAt] = k.at.Format("2006-01-02T15:04:05.000Z07:00")
			}
			b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "videogen-system", Name: apikeys.SecretName(k.id),
				CreationTimestamp: metav1.NewTime(k.created), Annotations: annotations,
				Labels: map[string]string{apikeys.LabelAPIKey: "true", apikeys.LabelAccount: k.account, apikeys.LabelKeyID: k.id}}})
		}
		listed, err := apikeys.List(ctx, b.Build(), "videogen-system", "")
		if err != nil {
			t.Fatal(err)
		}
		newestKeysFirst(listed)
		var got []string
		for _, k := range listed {
			got = append(got, k.ID)
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("apikey list (shuffle %d): %v; want the newest first: %s", seed, got, want)
		}
	}

	// apikey create writes the annotation, and List reads it back as the time it issued the key.
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}).Build()
	before := time.Now().Truncate(time.Millisecond)
	_, issued, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "rotation")
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(issued.ID)}, &s); err != nil {
		t.Fatal(err)
	}
	listed, err := apikeys.List(ctx, c, "videogen-system", "acme")
	if err != nil || len(listed) != 1 || listed[0].IssuedAt.Before(before) || listed[0].IssuedAt.After(after) {
		t.Fatalf("apikey create wrote %s=%q, read back as %+v (%v); want a time in [%s, %s]",
			apikeys.AnnotationIssuedAt, s.Annotations[apikeys.AnnotationIssuedAt], listed, err, before, after)
	}
}

// -o jsonpath prints integers as integers, for every command. Input: a billing script reads a
// balance with `videogenctl account show demo -o jsonpath='{.balance}'` (or the balance after a
// credit, `topup demo 1000000 --reference INV-9 -o jsonpath='{.balanceAfter}'`, or a task's
// price, `task get vt-1 -n demo -o jsonpath='{.status.cost}'`) and compares it with a number
// or feeds it to `expr`/`bc`. kubectl's jsonpath printer reads the JSON of an object that is not
// Unstructured (a view of ours, a typed VideoTask) with encoding/json, whose numbers are
// float64, and printed a balance of 1000000 as "1e+06", 1500000 as "1.5e+06", and a number
// beyond 2^53 rounded (jsonpath-as-json too): `[ "$(…)" -ge 500000 ]` fails with "integer
// expression expected", and a script that parses it as a float compares a rounded balance.
// kubectl itself prints its own objects' integers as integers (they are Unstructured, read
// with int64s), as its go-template printer does for any JSON. Now the jsonpath formats get the
// JSON with its integers as int64. go-template is checked too (it held: a pin).
func TestJSONPathPrintsIntegersAsIntegers(t *testing.T) {
	const huge = int64(1)<<53 + 1 // 9007199254740993: a float64 rounds it to ...992
	view := accountView{Account: "demo", Balance: 1000000, Frozen: 1500000, Spent: huge, Holds: []holdView{}, RecentTop: []topUpView{}}
	for format, want := range map[string]string{
		"jsonpath={.balance}":                     "1000000",
		"jsonpath={.frozen}":                      "1500000",
		"jsonpath={.spent}":                       "9007199254740993",
		"jsonpath-as-json={.spent}":               "[\n    9007199254740993\n]\n",
		"jsonpath={.balance} {.frozen}":           "1000000 1500000",
		"go-template={{.balance}} {{.frozen}}":    "1000000 1500000",
		"go-template={{.spent}}":                  "9007199254740993",
		"jsonpath={range .holds[*]}{.task}{end}x": "x",
	} {
		var out bytes.Buffer
		o := &options{output: format, out: &out}
		if err := o.print(view, nil); err != nil || out.String() != want {
			t.Errorf("account show -o %s printed %q, %v; want %q", format, out.String(), err, want)
		}
	}
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "vt-1"},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Progress: 100, Cost: ptr.To(int64(2500000))}}
	for format, want := range map[string]string{
		"jsonpath={.status.cost}":              "2500000",
		"jsonpath={.kind} {.status.progress}":  "VideoTask 100",
		"go-template={{.status.cost}}":         "2500000",
		"jsonpath-as-json={.status.cost}":      "[\n    2500000\n]\n",
		"jsonpath={.items[0].status.cost}":     "", // a task, not a list: nothing (missing keys allowed, as kubectl)
		"jsonpath={.metadata.name}={.kind}end": "vt-1=VideoTaskend",
	} {
		var out bytes.Buffer
		o := &options{output: format, out: &out}
		p, err := o.objectPrinter()
		if err == nil {
			err = p.PrintObj(task.DeepCopy(), &out)
		}
		if err != nil || out.String() != want {
			t.Errorf("task get -o %s printed %q, %v; want %q", format, out.String(), err, want)
		}
	}
	list := &videogenv1alpha1.VideoTaskList{Items: []videogenv1alpha1.VideoTask{*task}}
	var out bytes.Buffer
	o := &options{output: "jsonpath={.items[0].status.cost}", out: &out}
	if p, err := o.objectPrinter(); err != nil || p.PrintObj(list, &out) != nil || out.String() != "2500000" {
		t.Errorf("task list -o jsonpath={.items[0].status.cost} printed %q, %v; want 2500000", out.String(), err)
	}
}

// An account named twice, differently, is refused by every command that takes one, before
// anything is changed; TestAccountAndNamespaceThatDisagreeAreRefused refused it for --account and account show's NAME, not for
// topup's ACCOUNT, account create's NAME and apikey revoke under -n. Input: an administrator
// whose shell alias (or the line copied from above: `task list -n globex`) adds `-n globex`
// runs `topup acme 500 --reference INV-7 -n globex`, `account create acme -n globex`, or,
// after `apikey list -n globex`, `apikey revoke <id> -n globex` with the id of a key that is
// acme's (copied from the wrong terminal). Before the fix -n was ignored: acme was credited
// 500 points the command line says went to globex (globex's customer paid and got nothing,
// and the credit to acme is spendable at once), the account acme was created, and acme's
// key was revoked: acme's production requests got 401 for a command that named globex. Now
// each says the two name different accounts (or whose key it is), exit status 1, nothing
// changed; the same account twice, or ACCOUNT without -n, still works (a pin).
func TestAnAccountNamedTwiceDifferentlyIsRefused(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "videogen-system")
	for _, ns := range []string{"acme", "globex"} {
		mustCreateNamespace(t, ctx, c, ns)
		if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}); err != nil {
			t.Fatal(err)
		}
	}
	_, key, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "production")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "--kubeconfig", kubeconfig), &out)
		return out.String(), err
	}
	for _, args := range [][]string{
		{"topup", "acme", "500", "--reference", "INV-7", "--no-wait", "-n", "globex"},
		{"topup", "acme", "50", "--debit", "--note", "correction", "--reference", "CORR-7", "--no-wait", "-n", "globex"},
		{"account", "create", "initech", "-n", "globex"},
	} {
		if out, err := cli(args...); err == nil || !strings.Contains(err.Error(), "different accounts") {
			t.Errorf("%v: %v\n%s; want refused: ACCOUNT and -n name different accounts", args, err, out)
		}
	}
	if out, err := cli("apikey", "revoke", key.ID, "-n", "globex"); err == nil || !strings.Contains(err.Error(), `account "acme"'s, not "globex"'s`) {
		t.Errorf("apikey revoke of acme's key -n globex: %v\n%s; want refused: the key is acme's", err, out)
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps); err != nil || len(topUps.Items) != 0 {
		t.Errorf("a top-up was created (%d, %v): %+v", len(topUps.Items), err, topUps.Items)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "initech"}, &corev1.Namespace{}); err == nil {
		t.Errorf("account create initech -n globex created the namespace initech")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(key.ID)}, &corev1.Secret{}); err != nil {
		t.Errorf("acme's key was revoked: %v", err)
	}
	// Checked, holds: the same account twice, or one only, is one account.
	if _, err := cli("topup", "acme", "5", "--reference", "INV-8", "--no-wait", "-n", "acme"); err != nil {
		t.Errorf("topup acme -n acme: %v", err)
	}
	if _, err := cli("apikey", "revoke", key.ID, "-n", "acme"); err != nil {
		t.Errorf("apikey revoke of acme's key -n acme: %v", err)
	}
}

// -o go-template prints the views that are lists (apikey list, connectors), as jsonpath does.
// Input: a rotation script runs `videogenctl apikey list -n acme -o go-template='{{range
// .}}{{.id}}{{"\n"}}{{end}}'` to revoke the old keys, or a health check `connectors -o
// go-template='{{range .}}{{.connector}}={{.ready}} {{end}}'`; the help and the README say
// every command takes go-template=… (32705e1). Before the fix both failed: "json:
// cannot unmarshal array into Go value of type map[string]interface {}", exit status 1:
// kubectl's go-template printer reads what it prints into a map, and these views are JSON
// lists (as -o json prints them, and jsonpath takes them). An empty list prints what the
// template says of it (its header, or nothing), not an error; the file formats too.
func TestGoTemplatePrintsListViews(t *testing.T) {
	keys := []apikeys.Key{{ID: "000000000002", Account: "acme", Description: "new"}, {ID: "000000000001", Account: "acme", Description: "old"}}
	file := t.TempDir() + "/keys.tmpl"
	if err := os.WriteFile(file, []byte(`{{range .}}{{.id}} {{end}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format string
		view   any
		want   string
	}{
		{`go-template={{range .}}{{.id}}{{"\n"}}{{end}}`, keys, "000000000002\n000000000001\n"},
		{`go-template={{len .}} keys, the newest {{(index . 0).description}}`, keys, "2 keys, the newest new"},
		{`template={{range .}}{{.account}}{{end}}`, keys, "acmeacme"},
		{"go-template-file=" + file, keys, "000000000002 000000000001 "},
		{`go-template=ID{{range .}} {{.id}}{{end}}`, []apikeys.Key{}, "ID"},
		{`go-template={{range .}}{{.connector}}={{.ready}} {{end}}`, []connectorRow{{Connector: "stripe", Ready: true}}, "stripe=true "},
		// Checked, holds: a view that is an object prints as before.
		{`go-template={{.account}}`, map[string]string{"account": "acme"}, "acme"},
	} {
		var out bytes.Buffer
		o := &options{output: c.format, out: &out}
		if err := o.print(c.view, nil); err != nil || out.String() != c.want {
			t.Errorf("-o %s printed %q, %v; want %q", c.format, out.String(), err, c.want)
		}
	}
}

// topup whose create landed but answered an error waits for it, instead of saying it failed.
// Interleaving: 1. `videogenctl topup acme 300 --reference INV-11` sends the top-up's POST. 2.
// The kube-apiserver stores it, but the answer is an error: its own 504 "Timeout: request did
// not complete within requested timeout" (etcd slow: the write may land after the deadline),
// a connection dropped by a load balancer, or --request-timeout cut in. 3. The operator
// applies the top-up. Before the fix the CLI said "creating the top-up: Timeout: …", exit
// status 1, of a top-up that exists and is credited: the administrator, told nothing was
// made, tops up again; with the same reference it is refused (confusing, but safe), with a
// new one ("INV-11 failed, use INV-11b") the customer is credited twice. Now a create that
// the cluster did not refuse for sure is looked up by its name (ours alone): found, it is
// waited for as any other ("credited 300 points"); not found, the error says it may have
// been made all the same and how to check before topping up again. The proxy forwards the
// POST, writes the status the ledger writes (Credited, balance 300) and answers 504; in the
// second run it answers 504 without forwarding. No operator runs.
func TestTopUpWhoseCreateLandedButFailedIsWaitedFor(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "acme")
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}
	if err := c.Create(ctx, acct); err != nil {
		t.Fatal(err)
	}
	var forward atomic.Bool
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/namespaces/acme/pointtopups") {
			proxy.ServeHTTP(w, r)
			return
		}
		if forward.Load() { // step 2: stored
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			var tu videogenv1alpha1.PointTopUp
			if err := json.Unmarshal(rec.Body.Bytes(), &tu); err != nil || rec.Code != http.StatusCreated {
				t.Errorf("the POST: %d %v", rec.Code, err)
			} else { // step 3, as the ledger writes it
				now := metav1.Now()
				tu.Status = videogenv1alpha1.PointTopUpStatus{AppliedAt: &now, BalanceAfter: ptr.To(int64(300)), AccountUID: acct.UID}
				meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionTrue,
					Reason: videogenv1alpha1.ReasonCredited, Message: "Credited 300 points"})
				if err := c.Status().Update(context.Background(), &tu); err != nil {
					t.Error(err)
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":504,"reason":"Timeout",` +
			`"message":"Timeout: request did not complete within requested timeout - context deadline exceeded"}`))
	})
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, flags...), &out)
		return out.String(), err
	}
	forward.Store(true)
	if out, err := cli("topup", "acme", "300", "--reference", "INV-11"); err != nil || !strings.Contains(out, "credited 300 points to acme (reference INV-11); balance is now 300") {
		t.Errorf("topup whose create landed but answered 504: %v\n%s; want it waited for: credited 300 points", err, out)
	}
	forward.Store(false)
	if _, err := cli("topup", "acme", "300", "--reference", "INV-12"); err == nil || !strings.Contains(err.Error(), "may have been made all the same") {
		t.Errorf("topup whose create answered 504: %v; want it said that it may have been made, and how to check", err)
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil || len(topUps.Items) != 1 {
		t.Errorf("top-ups in acme: %d (%v); want the one that landed", len(topUps.Items), err)
	}
}

// task watch exits 2, not 1, for a command line it cannot parse. Input: a CI job runs
// `videogenctl task watch $TASK -n acme --timeout 10m` (kubectl wait's flag), or passes two
// names, or `--kubeconfig` with its value lost to an empty variable, and reads the exit status
// as the help says: 0 succeeded, 1 the task did not succeed, 2 it could not be followed.
// Before the fix a flag or argument error was exit status 1: the job reported "generation
// failed" (and a pipeline re-submitted, paying again) for a task it never looked at, which may
// well succeed. TestTaskWatchOfAnAccountExits2OnEveryError made every error of task watch 2 (d9a2468), but cobra's flag and
// argument errors come before RunE. Now they are 2 as well. No cluster is needed: the command
// line is refused first.
func TestTaskWatchExits2ForACommandLineItCannotParse(t *testing.T) {
	for _, args := range [][]string{
		{"task", "watch", "vt-1", "-n", "acme", "--timeout", "10m"},
		{"task", "watch", "vt-1", "vt-2"},
		{"task", "watch", "vt-1", "--kubeconfig"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err == nil || exitCode(err) != exitWatchFailed {
			t.Errorf("%v: %v, exit status %d; want %d (an error, not the answer that the task did not succeed)", args, err, exitCode(err), exitWatchFailed)
		}
	}
}

// account create says that top-ups made before it wait to be applied to it. Interleaving: 1. A
// customer's account acme is closed (debited to 0, deleted), or was never created yet. 2. A
// credit arrives meanwhile: the customer's payment, through a payment connector's webhook (a
// PaymentEvent's top-up, reference pi_…), or a GitOps PointTopUp; the ledger applies it to no
// account (AccountNotFound, or AccountClosing while the account closed) but keeps it for the
// account created next (docs/ledger.md). 3. Support re-creates the account: `account create
// acme`. Before the fix the CLI answered "account "acme" created with 0 points; top it up
// with: videogenctl topup acme AMOUNT --reference REF", and nothing else: support, told the
// account is empty, credits the customer's 300 points by hand under the invoice number
// (another reference, so not refused as a duplicate), and the waiting 300 land as well: 600
// points for one payment. Now it says how many top-ups wait for it and their points (-o json:
// waitingTopUps, waitingPoints); those refused for good and those applied to the account
// before are not counted. The statuses are what the ledger writes; no ledger runs.
func TestAccountCreateSaysWhatTopUpsWaitForIt(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	now := metav1.Now()
	for _, tu := range []struct {
		name, reference, reason string
		amount                  int64
		applied                 bool
	}{
		{"topup-payment", "pi_3Nx", videogenv1alpha1.ReasonAccountNotFound, 300, false},
		{"topup-while-closing", "INV-3", videogenv1alpha1.ReasonAccountClosing, 50, false},
		{"topup-refused", "INV-1", videogenv1alpha1.ReasonDuplicateReference, 70, false},
		{"topup-earlier", "INV-0", videogenv1alpha1.ReasonCredited, 1000, true},
	} {
		obj := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: tu.name},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: tu.amount, Reference: tu.reference}}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		cond := metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse, Reason: tu.reason, Message: tu.reason}
		if tu.applied {
			cond.Status = metav1.ConditionTrue
			obj.Status.AppliedAt, obj.Status.BalanceAfter, obj.Status.AccountUID = &now, ptr.To(tu.amount), "uid-of-the-account-before"
		}
		meta.SetStatusCondition(&obj.Status.Conditions, cond)
		if err := c.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var out bytes.Buffer
	if err := run(ctx, []string{"account", "create", "acme", "--kubeconfig", kubeconfig}, &out); err != nil ||
		!strings.Contains(out.String(), "2 top-ups made before it (+350 points") || strings.Contains(out.String(), "top it up with") {
		t.Errorf("account create acme with two top-ups waiting: %v\n%s; want it said that 2 top-ups (+350 points) are applied to it", err, out.String())
	}
	// -o json says it too; a namespace without waiting top-ups is told how to top it up (a pin).
	mustCreateNamespace(t, ctx, c, "globex")
	for account, want := range map[string]string{"acme": `"waitingPoints": 350`, "globex": `"balance": 0`} {
		if account == "acme" {
			if err := c.Delete(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
				t.Fatal(err)
			}
		}
		out.Reset()
		if err := run(ctx, []string{"account", "create", account, "-o", "json", "--kubeconfig", kubeconfig}, &out); err != nil || !strings.Contains(out.String(), want) ||
			(account == "globex" && strings.Contains(out.String(), "waiting")) {
			t.Errorf("account create %s -o json: %v\n%s; want %s", account, err, out.String(), want)
		}
	}
}
