package ledger

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Found by the twentieth adversarial review: a REST create whose answer is lost after the
// commit, and whose re-reads are not answered, is in doubt; but if the create's own Add event
// reached the ledger meanwhile (the informer's watch stream is up while single GETs are
// throttled), observe has named the entry's task (its UID, its hold Held). CreateTask then
// skipped the in-doubt answer (it is only for an entry without a UID) and returned the create's
// raw error: the ledger endpoint answered 500 internal_error, the Client a plain error, and the
// REST apiserver its client 500 "internal error", for a task that exists, holds its price and
// runs. A keyless client told 500 submits again: a second task, a second hold and charge for
// one submission (the very outcome TestACreateLeftInDoubtByTheLedgerIsNoAnswerToTheReplica
// fixed for the entry without a UID).
//
// Interleaving (one manager, its endpoint served to a Client as a replica has it):
//  1. Balance 100. A replica's Client sends a create of "a" at 60; the hold is counted.
//  2. The kube-apiserver commits the task and the answer is lost (a timeout after the commit).
//  3. The ledger re-reads "a"; the reads are throttled (429) past readTask's retries. During
//     them the informer delivers the Add of "a" (with its signed admission): the books name it.
//  4. The ledger answers the replica.
//
// Reachable: steps 2 and 3 are the faults of TestACreateLeftInDoubtByTheLedgerIsNoAnswerToTheReplica
// (an overloaded kube-apiserver throttling GETs, whose watches keep streaming); the Add event
// comes within the seconds readTask retries. What a user sees: 500 internal_error for a task
// that exists and runs.
func TestACreateNamedByItsEventWhileInDoubtIsNoInternalErrorToTheReplica(t *testing.T) {
	h := newHarness(t, 100)
	var outage, delivered atomic.Bool
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-20a", func(cfg *Config) {
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && outage.Load() {
					if !delivered.Swap(true) {
						// Step 3: the watch brings the create's Add while GETs are throttled.
						created := &videogenv1alpha1.VideoTask{}
						if err := k8s.Get(ctx, key, created); err != nil {
							t.Errorf("reading the created task: %v", err)
						} else {
							h.feed(l, created)
						}
					}
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.l = l
	srv := httptest.NewServer(Handler(l))
	defer srv.Close()
	c := &Client{URL: srv.URL, Deadline: 30 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1}}

	h.faults.creates.Store(1) // step 2
	outage.Store(true)        // step 3
	_, err := c.CreateTask(h.ctx, h.task("a"), 60)
	outage.Store(false)
	if !delivered.Load() {
		t.Fatal("the create's Add event was not delivered during its re-reads")
	}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, &videogenv1alpha1.VideoTask{}))
	if err != nil && !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("the replica's answer for a create that landed, named by its event while its re-reads failed: %v;\n"+
			"want it created or ErrNoAnswer (503 \"may have been created\"), not an internal error", err)
	}
	if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 {
		t.Fatalf("figures %+v: want the one task holding 60", f)
	}
}
