package apiserver_test

// The ledger client and the submit path
// as changed by c1f3423, e085d65, f0831e7, cfa1a11 and 4172a90.

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
)

var _ = Describe("A manager that dies after the create landed, behind an HTTP proxy", func() {
	// What breaks: c1f3423 made the ledger client answer ErrNoAnswer (in doubt) for a call one
	// of whose attempts reached a manager and got no answer, but it recognises such an attempt
	// only by a transport error of its own (mayHaveLanded: any unreachableError but a failed
	// dial). Behind an HTTP proxy the same event is an ANSWER: the proxy's 502 Bad Gateway
	// (Go's httputil.ReverseProxy, nginx; Envoy's is a 503 "upstream connect error or
	// disconnect/reset before headers"), a body that is not the ledger's JSON, which once()
	// maps to ErrNotReady. The later attempts meet the proxy's 502 again (its dials to the dead
	// manager fail). The call is ErrNotReady; submit answers 503 "the service is electing its
	// points ledger" (docs/api.md: nothing is created) and faceUnused(keyless, ErrNotReady)
	// deletes the face of the task that exists.
	//
	// Interleaving: failover_test.go's "a manager that dies after the create landed" (crashAfterCreate:
	// the create lands and holds 30, the manager dies before its 201, nothing listens until the
	// deadline), with a reverse proxy between the replica and the manager.
	//
	// Reachable: the replica's transport is a clone of http.DefaultTransport, which sends
	// through HTTP_PROXY/HTTPS_PROXY from the pod's environment; and a service mesh sidecar
	// (Istio, Linkerd: a namespace label a cluster admin sets) proxies every outbound
	// connection: then no dial ever fails (the sidecar accepts) and a dead manager is always a
	// proxy's 5xx. The crash and the failover are failover_test.go's.
	//
	// What the user sees: 503 "electing its points ledger" (nothing created) while the account
	// shows 30 frozen for a task whose face is gone (it will fail "the face image you uploaded
	// could not be read back"); a client that retries as told makes a second task.
	It("does not remove the face of a task it created, nor say nothing was created", func() {
		a := newAccount(100)
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		backend.Stall(tmpl)
		manager, _ := crashAfterCreate()
		target, err := url.Parse(manager)
		Expect(err).NotTo(HaveOccurred())
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		DeferCleanup(proxy.Close)
		srv := startAPIServerWith(rate.Inf, 1, nil, nil, crashedLedgerClient(proxy.URL))

		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()})
		GinkgoWriter.Printf("answer: %d %s\n", resp.Status, resp.Body)

		tasks := tasksIn(a.ns)
		Expect(tasks).To(HaveLen(1), "the create landed before the manager died")
		face := blobstore.NameIn(tasks[0].Spec.Inputs.FaceImageURL)
		Expect(face).NotTo(BeEmpty())
		Expect(api.get("/v1/balance", a.key).JSON()).To(HaveKeyWithValue("frozen", BeNumerically("==", 30)))
		if resp.Status == http.StatusServiceUnavailable {
			Expect(resp.Message()).NotTo(ContainSubstring("electing"),
				"503 'electing its points ledger' says nothing was created (docs/api.md), but task %s exists with 30 frozen", tasks[0].Name)
		}
		Expect(storedBlobs(srv)).To(ContainElement(face),
			"the face of task %s, created with its price frozen, was removed while the client was answered %d", tasks[0].Name, resp.Status)
	})
})
