package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	corev1 "k8s.io/api/core/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// The points audit found account show printing a top-up's appliedAt and a hold's since in the
// time zone of the machine it ran on (2026-11-29T02:42:00-05:00 with TZ=America/New_York), while
// kubectl get pointtopups -o yaml, task list -o json, the REST API and the top-up's own name
// (topup-20261129-074200-…) say the same instant in UTC (07:42:00Z): an auditor matching
// account show's figures to the top-ups found no line with the same time. account show now
// says times in UTC, as the rest does, whatever the machine's zone.
func TestAccountShowSaysTimesInUTCAsKubectlDoes(t *testing.T) {
	onAMachineInEST(t)

	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	backend := testbackend.New()
	cli := acmeWith100Points(t, ctx, env, kubeconfig, backend)
	backend.Set("vt-held", testbackend.Script{Analyze: testbackend.Hang})
	mustCreate(t, ctx, c, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-held"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}})
	acct := &videogenv1alpha1.PointAccount{}
	eventually(t, "the task holds its points", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}, acct) == nil && acct.Status.Holds == 1
	})

	// What kubectl prints: metav1.Time's JSON, always UTC.
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil || len(topUps.Items) != 1 || topUps.Items[0].Status.AppliedAt == nil {
		t.Fatalf("the top-up INV-1: %v, %+v", err, topUps.Items)
	}
	appliedJSON, _ := json.Marshal(topUps.Items[0].Status.AppliedAt)
	task := &videogenv1alpha1.VideoTask{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "vt-held"}, task); err != nil {
		t.Fatal(err)
	}
	createdJSON, _ := json.Marshal(ptr.To(task.CreationTimestamp))
	applied, created := strings.Trim(string(appliedJSON), `"`), strings.Trim(string(createdJSON), `"`)

	out, err := cli("account", "show", "acme", "-o", "json")
	if err != nil {
		t.Fatalf("account show -o json: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"appliedAt": "`+applied+`"`) || !strings.Contains(out, `"since": "`+created+`"`) {
		t.Errorf("account show -o json in a zone of UTC-5 says\n%s\nwant appliedAt %s and the hold since %s, as kubectl says them", out, applied, created)
	}
	out, err = cli("account", "show", "acme")
	if err != nil || !strings.Contains(out, applied) || !strings.Contains(out, created) {
		t.Errorf("account show in a zone of UTC-5: %v\n%s\nwant the top-up applied %s and the hold since %s, as kubectl says them", err, out, applied, created)
	}
}

// The same audit found apikey list printing a key's CREATED (and createdAt in -o json) in the
// machine's zone (2026-11-29T02:42:01-05:00), while kubectl get secret says the Secret's
// creationTimestamp in UTC, as every other time the CLI prints: now in UTC too.
func TestAPIKeyListSaysTimesInUTCAsKubectlDoes(t *testing.T) {
	onAMachineInEST(t)

	env, ctx, c := startControlPlane(t)
	path := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	_, k, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace("videogen-system"), client.MatchingLabels{apikeys.LabelKeyID: k.ID}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("the key's Secret: %v, %d found", err, len(secrets.Items))
	}
	createdJSON, _ := json.Marshal(ptr.To(secrets.Items[0].CreationTimestamp))
	created := strings.Trim(string(createdJSON), `"`)

	cli := cliWith(ctx, path)
	out, err := cli("apikey", "list")
	if err != nil || !regexp.MustCompile(`(?m)^`+k.ID+`\s+acme\s+`+regexp.QuoteMeta(created)+`\s`).MatchString(out) {
		t.Errorf("apikey list in a zone of UTC-5: %v\n%s\nwant the key created %s, as kubectl says it", err, out, created)
	}
	out, err = cli("apikey", "list", "-o", "json")
	if err != nil || !strings.Contains(out, `"createdAt": "`+created+`"`) {
		t.Errorf("apikey list -o json in a zone of UTC-5: %v\n%s\nwant createdAt %s, as kubectl says it", err, out, created)
	}
}

// The same audit: account show's table listed the top-ups without their balanceAfter (its -o
// json and kubectl get pointtopups have it), so the chain of balances an auditor checks top-up
// by top-up (500, 700, 670 after a debit of 30, 625 after a credit of 40 once 85 were spent)
// could not be read from it. A top-up not applied shows "-".
func TestAccountShowListsEachTopUpsBalanceAfter(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 40, 59, 0, time.UTC)
	v := accountView{Account: "acme", Balance: 670, Credited: 670, Ready: "True (Active)", RecentTop: []topUpView{
		{Name: "topup-20261129-074138-595-127612", Amount: 100, Reference: "INV-A-001", Refused: videogenv1alpha1.ReasonDuplicateReference},
		{Name: "topup-20261129-074058-611-90b386", Amount: -30, Reference: "CORR-A-1", AppliedAt: &at, BalanceAfter: ptr.To[int64](670), Note: "double invoice line"},
	}}
	var out strings.Builder
	if err := (&options{out: &out}).print(v, v.table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^TOP-UP\s+AMOUNT\s+REFERENCE\s+APPLIED\s+BALANCE AFTER\s+NOTE$`,
		`(?m)^topup-20261129-074058-611-90b386\s+-30\s+CORR-A-1\s+2026-11-29T07:40:59Z\s+670\s+double invoice line$`,
		`(?m)^topup-20261129-074138-595-127612\s+\+100\s+INV-A-001\s+refused: DuplicateReference\s+-\s*$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("account show's top-ups:\n%s\nwant a line matching %s", out.String(), want)
		}
	}
}

// The same audit closed acme (credited 500 and 200, debited 30, credited 40, then 85 spent on
// tasks and 625 debited by the close) and created it again. account show of the new account
// counted the earlier account's top-ups ("5 applied to earlier accounts") but not their points,
// which are the earlier account's books: it closed at 0, so they sum to what it spent (85),
// the figure no PointAccount keeps any more. With no account at all account show said that sum
// already ("+85 points; an account closes at 0, so what the closed ones spent"); a re-created
// account's now says it too, and -o json has it as earlierAccountPoints.
func TestAReCreatedAccountShowsWhatTheEarlierOneSpent(t *testing.T) {
	env, ctx, c, kubeconfig := asPlatformAdmin(t)
	cli := acmeWith100Points(t, ctx, env, kubeconfig, testbackend.New())
	mustCreate(t, ctx, c, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-paid"},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}})
	task := &videogenv1alpha1.VideoTask{}
	eventually(t, "the task is charged its 10 points", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: "vt-paid"}, task) == nil && task.Status.Charge == videogenv1alpha1.ChargeDeducted
	})
	if out, err := cli("account", "close", "acme", "--reference", "CLOSE-1"); err != nil {
		t.Fatalf("account close: %v\n%s", err, out)
	}
	eventually(t, "the account is gone", func() bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{})
		return err != nil && client.IgnoreNotFound(err) == nil
	})
	if out, err := cli("account", "create", "acme"); err != nil {
		t.Fatalf("account create again: %v\n%s", err, out)
	}

	out, err := cli("account", "show", "acme")
	if err != nil || !strings.Contains(out, "(2 applied to earlier accounts of namespace acme, not in credited: kubectl get pointtopups -n acme)\n"+
		"(the earlier accounts' top-ups applied come to +10 points; an account closes at 0, so what they spent)") {
		t.Errorf("account show of the re-created account: %v\n%s\nwant the earlier account's 2 top-ups and their +10 points, what it spent", err, out)
	}
	out, err = cli("account", "show", "acme", "-o", "json")
	var shown struct {
		EarlierAccountTopUps int   `json:"earlierAccountTopUps"`
		EarlierAccountPoints int64 `json:"earlierAccountPoints"`
	}
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.EarlierAccountTopUps != 2 || shown.EarlierAccountPoints != 10 {
		t.Errorf("account show -o json of the re-created account: %v\n%s\nwant earlierAccountTopUps 2, earlierAccountPoints 10", err, out)
	}
}

// onAMachineInEST sets the zone times are decoded into (time.Local, the machine's) to UTC−5
// for the test, as on an auditor's machine in New York.
func onAMachineInEST(t *testing.T) {
	saved := time.Local
	time.Local = time.FixedZone("EST", -5*60*60)
	t.Cleanup(func() { time.Local = saved })
}
