package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// API key commands whose write lands but whose answer is lost (a 504 after the commit).

// landsThen504 is a proxy in front of env's kube-apiserver that answers the POSTs whose path
// ends with suffix with the kube-apiserver's own 504 ("Timeout: request did not complete
// within requested timeout"): after forwarding them when forward is set (the write landed,
// its answer was lost: etcd slow past the request's deadline, a load balancer that dropped
// the connection), without forwarding them otherwise (the write did not land, or not yet).
// A POST the kube-apiserver refuses (409 AlreadyExists) is answered as it is. Every other
// request is forwarded. It returns the flags that point the CLI at it.
func landsThen504(t *testing.T, env *envtest.Environment, suffix string, forward *atomic.Bool) []string {
	t.Helper()
	return methodLandsThen504(t, env, http.MethodPost, suffix, forward)
}

// methodLandsThen504 is landsThen504 for the requests of method (a DELETE's path ends with the
// object's name).
func methodLandsThen504(t *testing.T, env *envtest.Environment, method, suffix string, forward *atomic.Bool) []string {
	t.Helper()
	return kubeProxy(t, env, func(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
		if r.Method != method || !strings.HasSuffix(r.URL.Path, suffix) {
			proxy.ServeHTTP(w, r)
			return
		}
		if forward.Load() {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			if rec.Code >= http.StatusMultipleChoices { // refused: its answer as it is
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGatewayTimeout)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":504,"reason":"Timeout",` +
			`"message":"Timeout: request did not complete within requested timeout - context deadline exceeded"}`))
	})
}

// apikey create whose Secret landed but answered an error prints the key, which works.
// Interleaving: 1. `videogenctl apikey create --account acme` makes a key and POSTs its
// Secret (the key's hash) to the operator's namespace. 2. The kube-apiserver stores it, but
// the answer is its 504 "Timeout: request did not complete within requested timeout" (etcd
// slow), or the connection drops (a load balancer's idle timeout, --request-timeout). Before
// the fix the CLI said "storing API key for account "acme": Timeout: …", exit status 1, and
// dropped the key: the key works (apikey list shows it; the REST API takes it) and nobody
// holds it, its secret is gone for good; the administrator, told nothing was made, runs
// apikey create again and gets a second key, and the first stays a working credential
// nobody knows to revoke. What a user expects: the key that was stored is the key issued, so
// the CLI looks its Secret up by its name (its random id, ours alone) and, when it holds this
// key's hash, prints the key as issued. When the Secret is not there (the 504 came first, or
// the write is still to land), it says the key may have been stored all the same, with its id,
// and how to revoke it if apikey list shows it (never the key itself: on stderr, in logs).
func TestAPIKeyWhoseSecretLandedButFailedIsShown(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	if err := c.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: videogenv1alpha1.PointAccountName}}); err != nil {
		t.Fatal(err)
	}
	var forward atomic.Bool
	flags := landsThen504(t, env, "/namespaces/videogen-system/secrets", &forward)
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, flags...), &out)
		return out.String(), err
	}
	forward.Store(true)
	out, err := cli("apikey", "create", "--account", "acme", "-o", "json")
	var view struct{ ID, Account, Key string }
	if err != nil || json.Unmarshal([]byte(out), &view) != nil || view.Key == "" {
		t.Fatalf("apikey create whose Secret landed but answered 504: %v\n%s; want the key it stored shown", err, out)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(view.ID)}, &s); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(view.Key))
	if string(s.Data["sha256"]) != hex.EncodeToString(sum[:]) {
		t.Errorf("the key shown is not the key stored")
	}

	forward.Store(false)
	_, err = cli("apikey", "create", "--account", "acme")
	if err == nil || !regexp.MustCompile(`may have been stored all the same.*apikey revoke [0-9a-f]{12}`).MatchString(err.Error()) || strings.Contains(err.Error(), "vg_") {
		t.Errorf("apikey create whose Secret answered 504 and is not there: %v; want it said that it may have been stored, its id and how to revoke it (not the key)", err)
	}
	keys, err := apikeys.List(ctx, c, "videogen-system", "acme")
	if err != nil || len(keys) != 1 {
		t.Errorf("keys of acme: %d (%v); want the one that landed", len(keys), err)
	}
}

// apikey revoke whose delete landed but answered an error says the key is revoked. Interleaving:
// 1. An administrator revokes a leaked key: `videogenctl apikey revoke 3f2a…`. 2. The
// kube-apiserver deletes its Secret, but the answer is its 504 (etcd slow) or the connection
// drops. Before the fix the CLI said "Timeout: request did not complete within requested
// timeout", exit status 1: in the middle of an incident the administrator is told the leaked
// key may still work, and the retry said "no API key with id …: it was never issued, or is
// revoked already", exit status 1 again, which a rotation script reads as a failure too. Now
// the key is read before the delete, and after an error the cluster did not refuse the delete
// with it is read again: there before and gone (or being deleted) now, it is revoked, and said
// so. A delete that did not land says the key may still work and to check apikey list (the
// Secret is still there: a pin that nothing is called revoked that is not).
func TestAPIKeyRevokeWhoseDeleteLandedButFailedSaysRevoked(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	mustCreateNamespace(t, ctx, c, "videogen-system")
	mustCreateNamespace(t, ctx, c, "acme")
	_, leaked, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "leaked")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := apikeys.Issue(ctx, c, "videogen-system", "acme", "other")
	if err != nil {
		t.Fatal(err)
	}
	var forward atomic.Bool
	flags := methodLandsThen504(t, env, http.MethodDelete, "", &forward)
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, flags...), &out)
		return out.String(), err
	}
	forward.Store(true)
	if out, err := cli("apikey", "revoke", leaked.ID); err != nil || !strings.Contains(out, "API key "+leaked.ID+" revoked") {
		t.Errorf("apikey revoke whose delete landed but answered 504: %v\n%s; want it said to be revoked", err, out)
	}
	forward.Store(false)
	if out, err := cli("apikey", "revoke", other.ID); err == nil || !strings.Contains(err.Error(), "may not be revoked") || strings.Contains(out, "revoked;") {
		t.Errorf("apikey revoke whose delete answered 504 and did not land: %v\n%s; want it said that the key may still work", err, out)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "videogen-system", Name: apikeys.SecretName(other.ID)}, &corev1.Secret{}); err != nil {
		t.Errorf("the key whose delete did not land: %v", err)
	}
	// Checked, holds: what is no id is said to be none, nothing more.
	if _, err := cli("apikey", "revoke", "vg_"+other.ID+"_short"); err == nil || !strings.Contains(err.Error(), "not a whole API key") || strings.Contains(err.Error(), "may still work") {
		t.Errorf("apikey revoke of a cut key: %v; want: not a whole API key", err)
	}
}
