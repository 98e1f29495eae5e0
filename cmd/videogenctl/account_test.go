package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Kubernetes' namespaces and the operator's own are refused before the cluster is asked: an
// account there would put its users next to the API key Secrets or the control plane.
func TestAccountCreateRefusesSystemNamespaces(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there: reaching the cluster would fail with "refused"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", "https://" + addr, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"account", "create", "kube-system"}, `"kube-system" cannot be an account: kube-* namespaces belong to Kubernetes`},
		{[]string{"account", "create", "kube-public"}, `"kube-public" cannot be an account: kube-* namespaces belong to Kubernetes`},
		{[]string{"account", "create", "videogen-system"}, `"videogen-system" cannot be an account: it is the operator's namespace (--key-namespace)`},
		{[]string{"account", "create", "ops", "--key-namespace", "ops"}, `"ops" cannot be an account: it is the operator's namespace (--key-namespace)`},
		// Only the namespace the operator runs in is its own: another name goes to the cluster.
		{[]string{"account", "create", "videogen-system", "--key-namespace", "ops"}, "was refused"},
		{[]string{"account", "create", "kubeflow"}, "was refused"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(tc.args, flags...), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// The QA's re-created account: an account credited INV-T2 and emptied is deleted, and created
// again. The ledger refuses INV-T2 on the new account, naming the top-up that applied it, and
// account show lists only the new account's top-ups (with those not applied), so that their
// sum is its credited, and counts the earlier account's apart.
func TestAReCreatedAccountShowsOnlyItsOwnTopUps(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	startTopUpController(t, ctx, env)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := cliWith(ctx, kubeconfig)
	mustCLI := func(want string, args ...string) {
		t.Helper()
		if out, err := cli(args...); err != nil || !strings.Contains(out, want) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}

	mustCLI(`account "team2" created`, "account", "create", "team2")
	mustCLI("balance is now 100", "topup", "team2", "100", "--reference", "INV-T2")
	// Refused by the first account: not the re-created one's refusal.
	if _, err := cli("topup", "team2", "500", "--debit", "--reference", "OVER-1", "--note", "too much"); err == nil || !strings.Contains(err.Error(), "exceeds the 100 points available") {
		t.Fatalf("a debit beyond the balance: %v, want refused", err)
	}
	mustCLI("balance is now 0", "topup", "team2", "100", "--debit", "--reference", "CLOSE-1", "--note", "account closed")
	// Closed as the finalizer would let it go: once its journal is empty.
	key := client.ObjectKey{Namespace: "team2", Name: videogenv1alpha1.PointAccountName}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		acct := &videogenv1alpha1.PointAccount{}
		if err := c.Get(ctx, key, acct); err != nil {
			return false, err
		}
		if len(acct.Status.Journal) != 0 {
			return false, nil
		}
		return true, c.Delete(ctx, acct)
	})
	if err != nil {
		t.Fatalf("closing the first account: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, key, &videogenv1alpha1.PointAccount{})), nil
	})
	if err != nil {
		t.Fatalf("the first account is not gone: %v", err)
	}

	mustCLI(`account "team2" created`, "account", "create", "team2")
	// topup waits while the ledger builds the new account's books from a fresh list.
	_, refusal := cli("topup", "team2", "100", "--reference", "INV-T2")
	if refusal == nil || !regexp.MustCompile(`refused: reference "INV-T2" was applied by PointTopUp topup-\S+ to an earlier account of this namespace`).MatchString(refusal.Error()) {
		t.Fatalf("INV-T2 again on the re-created account: %v, want refused as applied to an earlier account", refusal)
	}
	mustCLI("balance is now 40", "topup", "team2", "40", "--reference", "INV-T3")

	out, err := cli("account", "show", "team2", "-o", "json")
	var shown struct {
		Credited     int64 `json:"credited"`
		RecentTopUps []struct {
			Reference string     `json:"reference"`
			Amount    int64      `json:"amount"`
			AppliedAt *time.Time `json:"appliedAt"`
			Refused   string     `json:"refused"`
		} `json:"recentTopUps"`
		EarlierAccountTopUps   int `json:"earlierAccountTopUps"`
		EarlierAccountRefusals int `json:"earlierAccountRefusals"`
	}
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("account show -o json: %v\n%s", err, out)
	}
	var applied int64
	var listed []string
	for _, tu := range shown.RecentTopUps {
		listed = append(listed, tu.Reference+" "+tu.Refused)
		if tu.AppliedAt != nil {
			applied += tu.Amount
		}
	}
	slices.Sort(listed)
	if want := []string{"INV-T2 DuplicateReference", "INV-T3 "}; !slices.Equal(listed, want) || shown.EarlierAccountTopUps != 2 || shown.EarlierAccountRefusals != 1 {
		t.Errorf("account show lists %q, %d applied to and %d refused by earlier accounts; want %q, 2 and 1",
			listed, shown.EarlierAccountTopUps, shown.EarlierAccountRefusals, want)
	}
	if shown.Credited != 40 || applied != shown.Credited {
		t.Errorf("account show: credited %d, the top-ups listed applied sum to %d; want both 40", shown.Credited, applied)
	}
	mustCLI("(2 applied to and 1 refused by earlier accounts of namespace team2, not in credited: kubectl get pointtopups -n team2)", "account", "show", "team2")
}
