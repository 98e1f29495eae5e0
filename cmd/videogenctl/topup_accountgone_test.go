package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// topup ends its wait at once when the account was deleted (gone, not closing) after its check:
// the top-up then waits for the account created next, which no wait of the CLI sees. Before,
// the ledger's AccountNotFound status left the CLI polling its whole minute and then saying
// "not applied yet". The same status while the account exists (a ledger that has not seen an
// account created a moment ago) keeps the wait going: the top-up is applied shortly. The proxy
// deletes the account (no finalizer: gone at once) on the top-up's POST, after the CLI's account
// read, and writes the ledger's AccountNotFound status on the CLI's first read of the top-up;
// no ledger runs.
func TestTopUpToAnAccountDeletedMeanwhileEndsItsWait(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	topUpWait = 2 * time.Second
	t.Cleanup(func() { topUpWait = time.Minute })
	for _, tc := range []struct {
		account         string
		deleted         bool
		want            string
		minReads, reads int32 // of the top-up, at least and at most
	}{
		{account: "gone", deleted: true, want: "account gone was deleted after it was made; it waits, and is applied to the account created next", minReads: 1, reads: 1},
		{account: "lagging", want: "not applied yet", minReads: 3, reads: 100},
	} {
		t.Run(tc.account, func(t *testing.T) {
			mustCreateNamespace(t, ctx, c, tc.account)
			acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tc.account, Name: videogenv1alpha1.PointAccountName}}
			if err := c.Create(ctx, acct); err != nil {
				t.Fatal(err)
			}
			var reads atomic.Int32
			flags := kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
				bg := context.Background()
				switch {
				case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/namespaces/"+tc.account+"/pointtopups") && tc.deleted:
					if err := c.Delete(bg, acct); err != nil {
						t.Error(err)
					}
				case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/"+tc.account+"/pointtopups/topup-") && reads.Add(1) == 1:
					tu := &videogenv1alpha1.PointTopUp{}
					if err := c.Get(bg, client.ObjectKey{Namespace: tc.account, Name: r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]}, tu); err != nil {
						t.Error(err)
						break
					}
					meta.SetStatusCondition(&tu.Status.Conditions, metav1.Condition{Type: videogenv1alpha1.ConditionApplied, Status: metav1.ConditionFalse,
						Reason:  videogenv1alpha1.ReasonAccountNotFound,
						Message: "namespace \"" + tc.account + "\" has no PointAccount named \"default\" yet; the top-up is applied when it exists"})
					if err := c.Status().Update(bg, tu); err != nil {
						t.Error(err)
					}
				}
				proxy.ServeHTTP(w, r)
			})
			var out bytes.Buffer
			err := run(ctx, append([]string{"topup", tc.account, "300", "--reference", "INV-1"}, flags...), &out)
			if n := reads.Load(); err == nil || !strings.Contains(err.Error(), tc.want) || n < tc.minReads || n > tc.reads {
				t.Errorf("topup: %v after %d reads of the top-up; want %q after %d to %d reads", err, n, tc.want, tc.minReads, tc.reads)
			}
		})
	}
}
