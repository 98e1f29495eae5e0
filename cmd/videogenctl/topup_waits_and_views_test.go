package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// videogenctl, the items new_user_commands_test.go left open: the order of top-ups, task list
// and watch, the views' output formats, and top-up and account-show waits.

// account show lists the top-ups of one second newest first, so that its 10-newest cut never
// hides a newer one behind an older one. Input: a billing script runs `videogenctl topup acme
// 5 --reference INV-$n --no-wait` for twelve invoices in a loop (each takes a few tens of
// milliseconds against a nearby cluster), then `account show acme`. The kube-apiserver keeps
// creationTimestamp to the second, so all twelve tie on it and account show orders them by
// name, descending. Before the fix a top-up was named topup-<second>-<random hex>: within the
// second the order was the random part's, so the listing came in random order, and the cut
// to the 10 newest dropped two random ones of the twelve: INV-12, the last invoice, could be
// among the "(2 older: kubectl get pointtopups)" and missing from the list, while INV-1 was
// listed. Now the name carries the milliseconds (topup-<second>-<ms>-<hex>): the top-ups of
// one second sort by the time they were made. Deterministic: the names are topUpName's for
// chosen times and random parts (the random parts chosen in the opposite order of the times,
// the worst case the old names had), all with the same creationTimestamp, in shuffled order.
func TestTopUpsOfOneSecondAreNewestFirst(t *testing.T) {
	second := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var made []videogenv1alpha1.PointTopUp
	for i := range 12 {
		name := topUpName(second.Add(time.Duration(i*70)*time.Millisecond), [3]byte{byte(255 - i), 0, 0})
		made = append(made, videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(second)},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: "INV-" + string(rune('A'+i))}})
	}
	// One made a second later, another second's top-up: the creationTimestamp decides.
	made = append(made, videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{
		Name: topUpName(second.Add(1500*time.Millisecond), [3]byte{0, 0, 0}), CreationTimestamp: metav1.NewTime(second.Add(time.Second))},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: "INV-later"}})
	for seed := range uint64(20) {
		items := append([]videogenv1alpha1.PointTopUp(nil), made...)
		r := rand.New(rand.NewPCG(seed, 1))
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		newestTopUpsFirst(items)
		var got []string
		for _, it := range items[:recentTopUps] {
			got = append(got, it.Spec.Reference)
		}
		want := []string{"INV-later", "INV-L", "INV-K", "INV-J", "INV-I", "INV-H", "INV-G", "INV-F", "INV-E", "INV-D"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("the %d newest top-ups (shuffle %d): %v; want the newest first: %v (names %v)", recentTopUps, seed, got, want, names(items))
		}
	}
}

func names(items []videogenv1alpha1.PointTopUp) []string {
	var n []string
	for _, it := range items {
		n = append(n, it.Name)
	}
	return n
}

// task list -o name says on stderr that it found nothing, as the table does. Input: a new user
// (or a script's log) runs `videogenctl task list -n acme -o name` for an account without tasks,
// and `-n acmee`, a typo. Before the fix both printed nothing at all, exit status 0, where the
// table says "No tasks found in account "acme"." or that there is no account "acmee" (kubectl
// get -o name says "No resources found" on stderr too); the typo went unnoticed. stdout stays
// empty (a script reads names there); json and yaml print an empty list, which says it.
func TestTaskListByNameSaysItFoundNone(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var note bytes.Buffer
	stderr = &note
	t.Cleanup(func() { stderr = os.Stderr })
	for ns, want := range map[string]string{"acme": `No tasks found in account "acme".`, "acmee": `there is no account "acmee"`} {
		note.Reset()
		var out bytes.Buffer
		err := run(ctx, []string{"task", "list", "-n", ns, "-o", "name", "--kubeconfig", kubeconfig}, &out)
		if err != nil || out.Len() != 0 || !strings.Contains(note.String(), want) {
			t.Errorf("task list -n %s -o name: %v, stdout %q, stderr %q; want nothing on stdout and %q on stderr", ns, err, out.String(), note.String(), want)
		}
	}
}

// task watch shows a task being deleted. Interleaving: 1. `videogenctl task watch vt-1 -n acme`
// on a running task prints its row and opens a watch. 2. The task is deleted (a tenant's DELETE
// /v1/tasks/vt-1, kubectl delete): its finalizer keeps it while the operator stops its stages
// and refunds it, up to two minutes; the kube-apiserver sends a Modified event with
// deletionTimestamp set. 3. The operator writes its status meanwhile (a progress, as here, or
// the stopped stages). Before the fix the row of step 2 was the row already shown (the deletion
// timestamp is no column), so nothing was printed, and step 3 printed "running 30%": for up to
// two minutes the watch said the task runs on, then ended "deleted". Now the row says
// "deleting" from step 2 on, as kubectl says Terminating. Each step runs when the CLI has
// written the row before it (no sleeps); a finalizer of the test's stands for the operator's.
func TestTaskWatchShowsATaskBeingDeleted(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	mustCreateNamespace(t, ctx, c, "acme")
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-1", Finalizers: []string{"test.videogen.dev/hold"}},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	task.Status = videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Progress: 20}
	if err := c.Status().Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	watchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var rows []string
	out := &recordingWriter{do: func(p []byte) {
		mu.Lock()
		rows = append(rows, string(p))
		n := len(rows)
		mu.Unlock()
		bg := context.Background()
		switch n {
		case 1: // steps 2 and 3
			if err := c.Delete(bg, task); err != nil {
				t.Error(err)
			}
			fresh := &videogenv1alpha1.VideoTask{}
			if err := c.Get(bg, client.ObjectKeyFromObject(task), fresh); err != nil {
				t.Error(err)
				return
			}
			fresh.Status.Progress = 30
			if err := c.Status().Update(bg, fresh); err != nil {
				t.Error(err)
			}
		case 2: // the operator is done: its finalizer goes
			fresh := &videogenv1alpha1.VideoTask{}
			if err := c.Get(bg, client.ObjectKeyFromObject(task), fresh); err != nil {
				t.Error(err)
				return
			}
			fresh.Finalizers = nil
			if err := c.Update(bg, fresh); err != nil {
				t.Error(err)
			}
		}
	}}
	err := run(watchCtx, []string{"task", "watch", "vt-1", "-n", "acme", "--kubeconfig", kubeconfig}, out)
	mu.Lock()
	defer mu.Unlock()
	if len(rows) < 2 || !strings.Contains(rows[1], statusDeleting) {
		t.Errorf("task watch of a task being deleted printed %q; want its row saying %q once it is deleted", rows, statusDeleting)
	}
	if err == nil || !strings.Contains(err.Error(), "vt-1 was deleted") || !errors.Is(err, errTaskDidNotSucceed) {
		t.Errorf("task watch of a deleted task: %v; want \"task vt-1 was deleted ...\", exit status 1", err)
	}
}

// recordingWriter calls do with each write.
type recordingWriter struct{ do func(p []byte) }

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.do(append([]byte(nil), p...))
	return len(p), nil
}

// Every command takes the -o values of kubectl's printers that fit what it prints: the views
// (account create/show, topup, apikey, connectors, version) as the task commands. Input: a
// user who printed a task with `task get vt-1 -o kyaml` (as kubectl 1.34+ takes it) runs
// `account show acme -o kyaml`; a script takes the balance after a credit with `topup acme 500
// --reference INV-9 -o jsonpath={.balanceAfter}`, or the new key with `apikey create --account
// acme -o go-template={{.key}}`. Before the fix the views refused all three ("unknown output
// format: use table, json or yaml"), which the help's -o line did not say (it named jsonpath
// and go-template for the task commands only), and the script had to pipe JSON through jq.
// Only name stays the task commands' (a view is no object), refused as such; a template that
// does not parse says what is wrong with it, here and for the task commands, not "unknown
// output format". A refusal comes before anything is changed (checkViewFormat, as before).
func TestViewsTakeTheOutputFormatsOfTheTaskCommands(t *testing.T) {
	view := map[string]any{"account": "acme", "balanceAfter": 500, "holds": []map[string]any{{"task": "vt-1"}}}
	for format, want := range map[string]string{
		"kyaml":                       "---\n{\n  account: \"acme\",\n  balanceAfter: 500,\n  holds: [{\n    task: \"vt-1\",\n  }],\n}\n",
		"jsonpath={.balanceAfter}":    "500",
		"jsonpath={.holds[0].task}":   "vt-1",
		"go-template={{.account}}":    "acme",
		"jsonpath-as-json={.account}": "[\n    \"acme\"\n]\n",
	} {
		var out bytes.Buffer
		o := &options{output: format, out: &out}
		if err := o.checkViewFormat(); err != nil {
			t.Errorf("-o %s refused: %v", format, err)
			continue
		}
		if err := o.print(view, nil); err != nil || out.String() != want {
			t.Errorf("-o %s printed %q, %v; want %q", format, out.String(), err, want)
		}
	}
	o := &options{output: "name"}
	if err := o.checkViewFormat(); err == nil || !strings.Contains(err.Error(), "unknown output format") || !strings.Contains(err.Error(), "task commands") {
		t.Errorf("-o name for a view: %v; want refused, saying the task commands take it", err)
	}
	for _, format := range []string{"jsonpath={.account", "go-template={{.account"} {
		o := &options{output: format}
		if err := o.checkViewFormat(); err == nil || strings.Contains(err.Error(), "unknown output format") {
			t.Errorf("-o %s for a view: %v; want the template's own error", format, err)
		}
		if _, err := o.objectPrinter(); err == nil || strings.Contains(err.Error(), "unknown output format") {
			t.Errorf("-o %s for a task: %v; want the template's own error", format, err)
		}
	}
}

// account show of an account being closed does not list a credit that waits for the next
// account as pending for this one. Interleaving: 1. an administrator closes acme as
// docs/ledger.md says (debit what is left, delete the PointAccount; the ledger's finalizer
// keeps it until it is empty). 2. A credit arrives meanwhile: a payment webhook's PaymentEvent,
// a GitOps PointTopUp, or `topup acme 300 --no-wait` run just before the delete; the ledger
// does not apply it to the closing account but marks it Applied=False, AccountClosing, to go
// to the account created after it (3374951). 3. The administrator checks with
// `account show acme`. Before the fix the credit was listed as "pending" (and -o json said
// nothing else of it), which reads as about to be credited to this account: the
// administrator waits for it, or debits it too ("refused: DebitExceedsBalance"), or, once
// the account is gone and the customer asks where the 300 points went, credits them again on
// the new account under a new reference, and the waiting credit lands there too: 600. Now
// the row says the credit is for the account created next, and -o json says waiting:
// AccountClosing. The status is what the ledger writes (the test writes it, as the
// neighbouring AccountNotFound test does); a finalizer of the test's stands for the ledger's.
func TestAccountShowSaysACreditWaitsForTheNextAccount(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "acme")
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName,
		Finalizers: []string{"test.videogen.dev/hold"}}}
	if err := c.Create(ctx, acct); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, acct); err != nil { // step 1
		t.Fatal(err)
	}
	tu := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "inv-8"},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: 300, Reference: "INV-8"}}
	if err := c.Create(ctx, tu); err != nil { // step 2
		t.Fatal(err)
	}
	meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse,
		Reason: videogenv1alpha1.ReasonAccountClosing, Message: "the account is being closed; the credit is applied to the account created after it"})
	if err := c.Status().Update(ctx, tu); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(ctx, []string{"account", "show", "acme", "--kubeconfig", kubeconfig}, &out)
	if err != nil || strings.Contains(out.String(), "pending") || !strings.Contains(out.String(), "for the account created next") {
		t.Errorf("account show of a closing account: %v\n%s\nwant INV-8 shown as for the account created next, not pending", err, out.String())
	}
	out.Reset()
	var shown accountView
	if err := run(ctx, []string{"account", "show", "acme", "-o", "json", "--kubeconfig", kubeconfig}, &out); err != nil ||
		json.Unmarshal(out.Bytes(), &shown) != nil || len(shown.RecentTop) != 1 || shown.RecentTop[0].Waiting != videogenv1alpha1.ReasonAccountClosing {
		t.Errorf("account show -o json of a closing account: %v\n%s\nwant INV-8 with waiting: AccountClosing", err, out.String())
	}
}

// topup ends its wait at once when its credit will wait for the account created next. Interleaving:
// 1. `videogenctl topup acme 300 --reference INV-9` reads the account: not being closed. 2.
// Another administrator deletes acme to close it (the ledger's finalizer keeps it). 3. The CLI
// creates the top-up; the ledger does not apply a credit to a closing account and marks it
// Applied=False, AccountClosing (pointtopup_controller.go), to go to the account created after
// it. Before the fix the CLI polled on for its whole minute (about 240 reads, the spinner
// saying "waiting for the operator to credit 300 points"), then said "not applied yet",
// though nothing would change for this account. Now it ends at the first read that shows the
// status, saying the credit goes to the account created next. The proxy plays step 2 on the
// top-up's POST (after the CLI's account read) and step 3's status on the CLI's first read of
// the top-up; no ledger runs (the status is what it writes).
func TestTopUpToAnAccountClosedMeanwhileEndsItsWait(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "acme")
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName,
		Finalizers: []string{"test.videogen.dev/hold"}}}
	if err := c.Create(ctx, acct); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		bg := context.Background()
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/acme/pointtopups"): // step 2
			if err := c.Delete(bg, acct); err != nil {
				t.Error(err)
			}
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/acme/pointtopups/topup-") && reads.Add(1) == 1: // step 3
			tu := &videogenv1alpha1.PointTopUp{}
			if err := c.Get(bg, client.ObjectKey{Namespace: "acme", Name: r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]}, tu); err != nil {
				t.Error(err)
				break
			}
			meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse,
				Reason: videogenv1alpha1.ReasonAccountClosing, Message: "the PointAccount of namespace \"acme\" is being closed; the top-up is applied to the account created after it"})
			if err := c.Status().Update(bg, tu); err != nil {
				t.Error(err)
			}
		}
		proxy.ServeHTTP(w, r)
	})
	var out bytes.Buffer
	err := run(ctx, append([]string{"topup", "acme", "300", "--reference", "INV-9"}, flags...), &out)
	if err == nil || !strings.Contains(err.Error(), "being closed") || !strings.Contains(err.Error(), "account created after it") || reads.Load() > 2 {
		t.Errorf("topup to an account closed meanwhile: %v after %d reads of the top-up; want it to end at the first read of its AccountClosing status, saying so", err, reads.Load())
	}
}

// topup that timed out says why the top-up was not applied, not that a read failed, when its
// last read was cut short by the wait's own deadline. Input: `videogenctl topup acme 300
// --reference INV-10` while the operator is down (or its ledger not ready yet after a
// failover): the top-up stays unapplied for the CLI's whole minute. Its last read is made
// at the deadline (240 reads 250 ms apart end exactly at the minute) under the wait's own
// context: client-go's rate limiter refuses it ("rate: Wait(n=1) would exceed context
// deadline", seen in the test above before its fix), or a slow answer is cut off. Before the
// fix that read counted as a failed read: "top-up … not applied yet: its last read failed
// (client rate limiter Wait returned an error …)", blaming the connection, where the answer is
// "is the operator running?" or the top-up's own status (AccountNotFound: "applied when it
// exists"). Now a read runs under the command's context (with a deadline of its own). Here
// the wait is 1 s, and the proxy answers the first read of the top-up only once that second
// is over (a condition on the clock, not a guess: the read is then cut by the wait's deadline
// before the fix, whatever the machine's speed); no operator runs.
func TestTopUpTimedOutBlamesNoReadItsDeadlineCut(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	topUpWait = time.Second
	t.Cleanup(func() { topUpWait = time.Minute })
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	var created atomic.Int64
	var reads atomic.Int32
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/acme/pointtopups"):
			created.Store(time.Now().UnixNano())
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/acme/pointtopups/topup-") && reads.Add(1) == 1:
			over := time.Unix(0, created.Load()).Add(topUpWait + 500*time.Millisecond)
			for time.Now().Before(over) {
				time.Sleep(10 * time.Millisecond) // until the wait's second is over: a condition, not a guess
			}
			proxy.ServeHTTP(w, r.WithContext(context.Background())) // answered, even if the CLI gave up on it
			return
		}
		proxy.ServeHTTP(w, r)
	})
	var out bytes.Buffer
	err := run(ctx, append([]string{"topup", "acme", "300", "--reference", "INV-10"}, flags...), &out)
	if err == nil || !strings.Contains(err.Error(), "is the operator running?") || strings.Contains(err.Error(), "read failed") {
		t.Errorf("topup not applied within its wait: %v; want \"not applied yet: is the operator running?\", not a failed read", err)
	}
}
