package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The VideoTask controller's use of the ledger (View, Admit, Charge,
// Observe, endCharged) under stale caches, conflicts and crashes.

// What breaks: a task made with kubectl whose backend answers at once is charged before any
// status write records its hold (accept → advance: both stages Succeeded in the first
// reconcile → finish → Charge; the status is put back to `before`, nothing written; the
// controller keeps the terminal status in its in-memory `ends` map). If the manager crashes (or
// loses its Lease) after the charge lands and before endCharged writes Succeeded/Deducted, the
// new manager finds the task charged (the journal has it) but with an empty status: no
// `charge: Frozen`, no `cost`, and no signed admission (kubectl). The books' entry gets its
// price from the copy (`e.price = max(e.price, ev.price)` = 0), not from the journal entry's
// Amount, so View says Charged with Price 0, and endCharged writes `cost: 0` (CEL lets a first
// cost be anything) and the event "deducted 0 points".
//
// Interleaving, step by step:
//  1. A tenant creates VideoTask k with kubectl (no admission annotation); the informer
//     delivers it (unadmitted).
//  2. Manager A's controller: View → Unadmitted → accept → Admit(k, 10) (pending) → advance:
//     the backend's Submit and Observe answer Succeeded for both stages at once (a fast or
//     cached backend; the code says so: "a fast backend may be done already") → finish →
//     Charge (charging, queued); the status goes back to `before`: nothing is written.
//  3. A's ledger writes the account: spent 10, journal entry {k, Amount 10, Result}.
//  4. A crashes (OOM, node loss) or loses its Lease before the controller's requeue runs
//     endCharged (the window is the requeue plus the releaseWork patch plus the status write).
//  5. Manager B is elected: fence, then lists the open tasks: k, with an empty status. install
//     → observe: in the journal → charged, price max(0, 0) = 0.
//  6. B's controller: View → Charged, Price 0, Result from the journal → endCharged (no `ends`
//     entry in this process) → writes Succeeded, Deducted, cost 0.
//
// Why each step is reachable: 1 is any tenant's kubectl; 2 is the documented fast path of
// advance (the test backend and any backend with a cached result answer at once); 3 is the
// ledger's ordinary write; 4 is a crash or failover, which the argument claims to survive
// ("the entry carries the result, so a new manager finishes the task from it"); 5 and 6 are
// the new manager's ordinary rebuild and reconcile.
//
// What a user sees: `kubectl get videotask k` says Succeeded, Deducted, cost 0, and its Settle
// event "deducted 0 points", while the account's spent went up by 10: spent ≠ the sum of the
// succeeded tasks' costs, and the customer's invoice built from task costs misses 10 points.
func TestAChargeFinishedByANewManagerCarriesItsPriceIntoTheTasksCost(t *testing.T) {
	h := newHarness(t, 100)
	ctxA, crashA := context.WithCancel(h.ctx)
	a := h.start(ctxA, "manager-a")
	task := h.task("k")
	must(t, k8s.Create(h.ctx, task))
	h.feed(a, task)
	must(t, admit(a, task, 10))
	h.charge(a, task) // queued by finish, then landed: A's Charge answers true
	h.books(h.settle(a), 100, 10, 0)
	crashA() // before endCharged writes Succeeded, Deducted

	b := h.start(h.ctx, "manager-b")
	fresh := &videogenv1alpha1.VideoTask{}
	must(t, k8s.Get(h.ctx, client.ObjectKeyFromObject(task), fresh))
	v, err := b.View(fresh)
	must(t, err)
	if v.Standing != Charged || v.Result == nil {
		t.Fatalf("view %+v: want Charged with the journal's result", v)
	}
	// B's controller: endCharged, as written in controllers/videotask_finish.go.
	done := h.writeStatus(b, fresh, func(st *videogenv1alpha1.VideoTaskStatus) {
		now := metav1.Now()
		price := v.Price
		st.Phase, st.Charge, st.Result, st.Progress, st.CompletedAt = videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, v.Result, 100, &now
		st.Cost = &price
		st.Closed = true
	})
	h.feed(b, done)
	acct := h.settle(b)
	h.booksClosed(acct, 100, 10, 0)
	if done.Status.Cost == nil || *done.Status.Cost != acct.Status.Spent {
		t.Fatalf("the task ends Succeeded, Deducted with cost %d (View's price %d) while the account spent %d for it: "+
			"the new manager priced the charged task from its empty status, not from its journal entry", *done.Status.Cost, v.Price, acct.Status.Spent)
	}
}

// What breaks: every charge queued for an account goes into ONE account write (plan takes all
// of b.queued), with each task's result copied into its journal entry. When the charges queued
// between two writes are more than the kube-apiserver/etcd take in one object (etcd's request
// limit, 1.5 MiB by default), the write fails, and every retry carries the same entries plus the
// ones queued since: it never fits again. The account is wedged for good: no charge, top-up or
// forget of that account ever lands, every task that succeeded stays Charging (Running to its
// user, its points frozen), the controller requeues them every 10 s forever, and the account
// cannot be closed.
//
// Interleaving, step by step:
//  1. A namespace runs a batch: N tasks held (kubectl or REST).
//  2. Their renders finish within one write interval (a backend outage ends and the backlog
//     completes at once, or simply a large batch on a fast backend); each reconcile calls Charge
//     with the backend's result (URL plus metadata: nothing bounds their size), queued.
//  3. The writer plans one write with all N entries: too large, refused; it retries the same
//     plan 20 times, then re-plans with everything queued meanwhile (larger still), forever.
//
// Why reachable: nothing bounds the number of charges per write or the size of a result, and
// nothing splits a write; the sizes here (400 tasks, results of about 4 KiB, e.g. a signed URL
// and per-scene metadata) are one batch customer's ordinary afternoon. With results of 1 KiB it
// takes about 1,500 charges within a second or so of lag.
//
// What a user sees: the account's spent never moves, its tasks never end (Running, points
// frozen), new charges and top-ups of the namespace never land, the manager logs "writing the
// account; retrying" forever. Suggested fix: cap the entries (by count and bytes) per write and
// leave the rest queued for the next one; bound or drop the result's metadata in the entry.
//
// Fixed: a write carries at most maxJournalBytes of journal; the rest waits for the controller's
// Deducted writes to let earlier entries go.
func TestManyChargesQueuedForOneWriteAreAllWritten(t *testing.T) {
	const tasks, price = 400, int64(10)
	h := newHarness(t, tasks*price)
	var lastErr sync.Mutex
	var writeErr error
	s := h.stepped("ledger-2", func(cfg *Config) {
		base := cfg.Client
		cfg.Client = interceptor.NewClient(k8s, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, _ client.Client, sub string, obj client.Object, o ...client.SubResourceUpdateOption) error {
				err := base.SubResource(sub).Update(ctx, obj, o...)
				if err != nil {
					lastErr.Lock()
					writeErr = err
					lastErr.Unlock()
				}
				return err
			},
		})
	})
	metadata := map[string]string{"scenes": strings.Repeat("s", 3500)}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(h.ctx)
	g.SetLimit(8)
	for i := range tasks {
		g.Go(func() error {
			task := h.task(fmt.Sprintf("batch-%03d", i))
			if err := k8s.Create(gctx, task); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			h.feed(s.l, task)
			if err := admit(s.l, task, price); err != nil {
				return err
			}
			result := &videogenv1alpha1.TaskResult{URL: "https://media.example/out/" + task.Name + ".mp4?X-Signature=" + strings.Repeat("a", 500),
				MediaType: "video/mp4", Metadata: metadata}
			done, err := s.l.Charge(task, result)
			if done || err != nil {
				return fmt.Errorf("charge of %s: done %v, err %v", task.Name, done, err)
			}
			return nil
		})
	}
	must(t, g.Wait())
	// The writer's clock runs: every write and retry may go. The controller ends each task
	// whose charge landed (Succeeded, Deducted), which lets its journal entry go: a write
	// carries a bounded journal, so the later charges wait for room.
	b := s.l.book(h.ns)
	ended := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		queued := len(b.queued)
		var landed []string
		for name, e := range b.tasks {
			if e.state == charged && !ended[name] {
				landed = append(landed, name)
			}
		}
		b.mu.Unlock()
		for _, name := range landed {
			cur := &videogenv1alpha1.VideoTask{}
			must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, cur))
			cost := price
			h.writeStatus(s.l, cur, func(st *videogenv1alpha1.VideoTaskStatus) {
				st.Phase, st.Charge, st.Cost, st.Closed = videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, &cost, true
			})
			ended[name] = true
		}
		if queued == 0 {
			break
		}
		if s.clk.HasWaiters() {
			s.clk.Step(time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.mu.Lock()
	queued := len(b.queued)
	b.mu.Unlock()
	lastErr.Lock()
	err := writeErr
	lastErr.Unlock()
	if queued != 0 {
		t.Fatalf("after 20 s, %d of %d charges are still queued and the account spent %d (want %d): the one write that carries them all is refused, and so is every retry: last error: %v",
			queued, tasks, h.account().Status.Spent, tasks*price, err)
	}
	h.books(h.account(), tasks*price, tasks*price, 0)
}
