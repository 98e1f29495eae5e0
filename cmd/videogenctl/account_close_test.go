package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testbackend"
)

// account close runs the steps of docs/ledger.md in their order, each once, and a run stopped
// by what it cannot do goes on from there when run again. Interleaving: 1. acme has 100 points,
// two tasks that run until canceled (10 points frozen each) and an API key. 2. account close
// acme without --reference: refused at once, the points to debit named, nothing changed. 3.
// with --reference: it suspends acme and stops, naming the unfinished tasks: nothing canceled,
// debited or deleted. 4. again with --cancel-tasks: both tasks canceled and refunded, 100
// debited by a PointTopUp with the note, the PointAccount deleted and closed by the operator,
// whose close revokes the key. Before, each step was the administrator's to remember, and the offboarding tour found
// the keys forgotten: they kept reading the tasks and spent the points of the next account.
func TestAccountCloseRunsTheStepsInOrder(t *testing.T) {
	// As the platform administrator docs/deploy.md binds: the close needs no more rights.
	env, ctx, c, kubeconfig := asPlatformAdmin(t)
	backend := testbackend.New()
	cli := acmeWith100Points(t, ctx, env, kubeconfig, backend)
	key, _, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "the customer's")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vt-1", "vt-2"} {
		backend.Set(name, testbackend.Script{Analyze: testbackend.Hang})
		mustCreate(t, ctx, c, &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://cdn.example.com/v.mp4"}}})
	}
	acct := &videogenv1alpha1.PointAccount{}
	accountKey := client.ObjectKey{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}
	eventually(t, "both tasks hold their points", func() bool {
		return c.Get(ctx, accountKey, acct) == nil && acct.Status.Frozen == 20 && acct.Status.Holds == 2
	})

	// Step 2: without --reference, while there are points to debit, refused before anything changes.
	if out, err := cli("account", "close", "acme"); err == nil || !strings.Contains(err.Error(), "80 points available and 20 held") || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("account close without --reference: %v\n%s; want refused, naming the points, nothing changed", err, out)
	}
	if err := c.Get(ctx, accountKey, acct); err != nil || acct.Spec.Suspended {
		t.Fatalf("after the close refused for want of --reference: %v, suspended %v; want the account untouched", err, acct.Spec.Suspended)
	}

	out, err := cli("account", "close", "acme", "--reference", "CLOSE-1") // step 3
	if err == nil || !strings.Contains(err.Error(), "2 unfinished task(s)") || !strings.Contains(err.Error(), "--cancel-tasks") {
		t.Fatalf("account close with tasks running: %v\n%s; want it to stop at the 2 unfinished tasks, naming --cancel-tasks", err, out)
	}
	if err := c.Get(ctx, accountKey, acct); err != nil || !acct.Spec.Suspended || !acct.DeletionTimestamp.IsZero() || acct.Status.Frozen != 20 {
		t.Fatalf("after the close stopped at the tasks: %v, suspended %v, deleted %v, frozen %d; want suspended, not deleted, 20 frozen",
			err, acct.Spec.Suspended, acct.DeletionTimestamp, acct.Status.Frozen)
	}

	out, err = cli("account", "close", "acme", "--reference", "CLOSE-1", "--cancel-tasks") // step 4
	if err != nil || !strings.Contains(out, "account acme closed: 100 points debited") || !strings.Contains(out, "its API keys are revoked") {
		t.Fatalf("account close: %v\n%s; want acme closed, 100 points debited, its keys revoked", err, out)
	}
	for _, name := range []string{"vt-1", "vt-2"} {
		var task videogenv1alpha1.VideoTask
		if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: name}, &task); err != nil || task.Status.Charge != videogenv1alpha1.ChargeRefunded {
			t.Errorf("task %s after --cancel-tasks: charge %q, %v; want refunded", name, task.Status.Charge, err)
		}
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.Get(ctx, accountKey, acct); !apierrors.IsNotFound(err) {
		t.Errorf("the PointAccount after the close: %v; want it gone", err)
	}
	auth := &apikeys.Authenticator{Reader: c, Namespace: "videogen-system"}
	if _, err := auth.Authenticate(ctx, key); err != apikeys.ErrInvalidKey {
		t.Errorf("the customer's key after the close: %v; want it revoked", err)
	}
	if err := c.List(ctx, &topUps, client.InNamespace("acme")); err != nil || len(topUps.Items) != 2 {
		t.Fatalf("top-ups after the close: %d, %v; want INV-1 and the debit", len(topUps.Items), err)
	}
	for _, tu := range topUps.Items {
		if tu.Spec.Reference == "CLOSE-1" && (tu.Spec.Amount != -100 || tu.Spec.Note != "account closed" || tu.Status.BalanceAfter == nil || *tu.Status.BalanceAfter != 0) {
			t.Errorf("the close's debit: %+v %+v; want -100, noted, leaving 0", tu.Spec, tu.Status)
		}
	}
	if _, err := cli("account", "close", "acme"); err == nil || !strings.Contains(err.Error(), `no account "acme"`) {
		t.Errorf("closing a closed account: %v; want no account", err)
	}
}

// acmeWith100Points starts the operator, with backend serving every capability, and as the user
// of kubeconfig creates account acme and credits it 100 points; it returns that user's CLI.
func acmeWith100Points(t *testing.T, ctx context.Context, env *envtest.Environment, kubeconfig string, backend generation.Backend) func(args ...string) (string, error) {
	t.Helper()
	startOperator(t, ctx, env, backend)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	cli := cliWith(ctx, kubeconfig)
	if _, err := cli("account", "create", "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("topup", "acme", "100", "--reference", "INV-1"); err != nil {
		t.Fatal(err)
	}
	return cli
}

// startOperator runs the operator's controllers (the ledger among them) against env, with
// backend serving every capability, until the test ends.
func startOperator(t *testing.T, ctx context.Context, env *envtest.Environment, backend generation.Backend) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: controllers.CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	opts := controllers.DefaultOptions()
	opts.Task.PollInterval = 50 * time.Millisecond
	opts.Task.DefaultPrice = 10
	opts.Ledger.SigningKey = []byte("videogenctl-test-signing-key-0123456789")
	opts.Ledger.WriteInterval = 50 * time.Millisecond
	opts.Webhooks.SecretNamespace = "videogen-system"
	routes := generation.Routes{}
	for _, capability := range videogenv1alpha1.Capabilities {
		routes[capability] = generation.Named{Name: "test-backend", Backend: backend}
	}
	opts.Backends = routes
	if _, err := controllers.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually waits up to 30 s for cond, failing the test with what it waited for.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waited 30s: %s", what)
	}
}

// A credit applied between the close's debit and its delete leaves points: the close stops and
// says so, the account kept and not deleted, and run again it debits them too. Interleaving: 1.
// acme has 100 points. 2. account close acme reads them and sends its debit of 100. 3. Before
// the debit reaches the kube-apiserver, a colleague's top-up of 50 is created and credited. 4.
// The debit is applied (50 left) and the close reads the account again.
func TestAccountCloseStopsAtACreditAppliedAfterItsDebit(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	mustCreateNamespace(t, ctx, c, "videogen-system")
	cli := acmeWith100Points(t, ctx, env, kubeconfig, testbackend.New())
	var credited sync.Once
	flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/acme/pointtopups") {
			credited.Do(func() { // step 3
				if _, err := cli("topup", "acme", "50", "--reference", "INV-2"); err != nil {
					t.Errorf("the colleague's credit: %v", err)
				}
			})
		}
		proxy.ServeHTTP(w, r)
	})
	var out bytes.Buffer
	err := run(ctx, append([]string{"account", "close", "acme", "--reference", "CLOSE-1"}, flags...), &out)
	if err == nil || !strings.Contains(err.Error(), "has 50 points again after the debit") || !strings.Contains(err.Error(), "another --reference") {
		t.Fatalf("account close with a credit applied after its debit: %v\n%s; want it to stop at the 50 points", err, out.String())
	}
	acct := &videogenv1alpha1.PointAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}, acct); err != nil || !acct.DeletionTimestamp.IsZero() {
		t.Fatalf("the account after the close stopped: %v, deleted %v; want it kept, not deleted", err, acct.DeletionTimestamp)
	}
	if out, err := cli("account", "close", "acme", "--reference", "CLOSE-2"); err != nil || !strings.Contains(out, "account acme closed: 50 points debited") {
		t.Errorf("account close again: %v\n%s; want 50 debited and the account closed", err, out)
	}
}
