package ledger

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The REST apiserver's ledger client when the manager dies behind a proxy.
//
// What breaks: c1f3423 made a call with an attempt that "went out and got no answer"
// ErrNoAnswer (in doubt) instead of ErrNotReady ("no manager listened: nothing was created"),
// but it recognises such an attempt only as a transport error of its own (mayHaveLanded). When
// an HTTP proxy stands between the replica and the manager, the same event reaches the client
// as an answer: the proxy's 502 Bad Gateway (Go's httputil.ReverseProxy, nginx) or 503
// (Envoy: "upstream connect error or disconnect/reset before headers"), with a body that is not
// the ledger's JSON. once() maps every such 502/503 to ErrNotReady, and the call ends
// ErrNotReady: the REST apiserver answers 503 "the service is electing its points ledger" and,
// for a keyless request, faceUnused removes the inline face (ErrNotReady: nothing created).
//
// The interleaving:
//  1. A keyless POST with an inline face: the face is stored, the ledger client sends the
//     create through the proxy to the elected manager.
//  2. The manager admits the price (frozen) and the task lands on the kube-apiserver; the
//     manager dies before it writes the 201 (the connection closes unanswered).
//  3. The proxy answers the replica 502 (its upstream closed the connection before headers).
//  4. Until the deadline, no manager is elected yet: the proxy's dials fail, 502 again.
//  5. The call is ErrNotReady. The replica says nothing was created and deletes the face; the
//     task exists, frozen, and fails on its missing face; the customer, told to retry, submits
//     again: a second task and a second freeze from one intent.
//
// Reachable: the REST apiserver's transport is http.DefaultTransport's clone, which honours
// HTTP_PROXY/HTTPS_PROXY from the pod's environment, and a service mesh sidecar (Istio/Linkerd,
// enabled by a namespace label a cluster admin sets) puts an Envoy proxy in every outbound
// connection: then no dial of the client ever fails (the sidecar accepts), and a manager that
// dies with a create open is always a proxy's 5xx. Steps 2 and 4 are the failover the earlier
// round's test already uses (TestACallThatWentOutUnansweredIsNoAnswerThoughNoManagerListensAfter);
// this test is that one with a reverse proxy in front.
//
// What a user sees: 503 "electing its points ledger" (nothing created, face deleted) for a
// task that exists and holds points; a retry doubles the task and the freeze.
func TestRESTAManagerThatDiesBehindAProxyIsNotSaidToHaveCreatedNothing(t *testing.T) {
	var landed atomic.Int32
	var manager *httptest.Server
	manager = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		landed.Add(1) // the create landed and its price is frozen
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = manager.Listener.Close() // the process dies: its port stops listening
		_ = conn.Close()
	}))
	defer manager.Close()
	target, err := url.Parse(manager.URL)
	must(t, err)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target)) // the sidecar, the ingress
	defer proxy.Close()

	c := &Client{URL: proxy.URL, Deadline: 500 * time.Millisecond,
		Backoff: wait.Backoff{Duration: 20 * time.Millisecond, Factor: 1.5, Steps: 100, Cap: 50 * time.Millisecond}}
	_, err = c.CreateTask(context.Background(), taskNamed("team", "t"), 10)
	if landed.Load() != 1 {
		t.Fatalf("the create reached the manager %d times, want 1", landed.Load())
	}
	if !errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrNotReady) {
		t.Errorf("%v\nthe create landed (the manager took it and died): want ErrNoAnswer (in doubt, the face kept), "+
			"not ErrNotReady (\"electing its points ledger\", nothing created: the keyless face is deleted)", err)
	}
}
