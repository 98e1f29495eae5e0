package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// A REST create's hold is counted from the
// create's answer (CreateTask), not from an informer event, so the books can hold a task the
// manager's informer never had. If that task is deleted before the informer sees it, no event
// ever reaches the books: a reflector whose watch fell out of the watch cache's window (410
// Gone: a kube-apiserver restarted, an upgrade, a long network break) relists, and Replace
// reports deletions only of objects its store held. The hold then stays until the next
// failover rebuilds the books from a list: the points are frozen, and a closing account never
// becomes closable (Closable waits for holds 0).
//
// Interleaving (one manager; HA kube-apiservers behind one address): 1. the manager's VideoTask
// watch breaks (its kube-apiserver restarts); 2. a REST create of "a" at 60 lands through
// another kube-apiserver, and its answer counts the hold (held, UID from the answer); 3. the
// tenant deletes "a" (kubectl delete: no stage ran, so no finalizer keeps it: the controller,
// fed by the same broken watch, never accepted it); 4. the watch reconnects with 410 and
// relists: "a" is in neither the old store nor the list, so no Add, no Delete. Nothing else reads
// the task again (confirm runs only for tasks counted from a read made outside the lock). What
// the customer sees: GET /v1/balance frozen 60, balance 40, for ever, with no task holding it;
// the administrator closing the account waits for a hold that never ends.
//
// Want: an entry counted from a create's answer and never named by an event is read again
// (confirm) after a while, on the ledger's clock, until an event names it or it is found gone.
// The fix: entry.evented, set by taskEvent; CreateTask's success path marks the entry for sweepUnevented,
// which every 30 s on l.cfg.Clock, while the entry is the same and no event named it, calls
// confirm (which drops a task found gone or closed). Failed before it (d6626ed): the books
// still held {Balance:40 Frozen:60 Holds:1} after 100 minutes of the ledger's clock.
func TestARESTTaskDeletedWhileTheInformerRelistedDoesNotHoldForEver(t *testing.T) {
	h := newHarness(t, 100)
	h.settle(h.l) // the harness's own ledger is done with the account; this test's runs alone
	clk := clocktesting.NewFakeClock(time.Now())
	l := h.startWith(h.ctx, "ledger-1", func(c *Config) { c.Clock = clk })
	// 2. Created; its answer counts the hold. No event is fed: the watch is broken.
	a := h.create(l, "a", 60)
	if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 {
		t.Fatalf("after the create: %+v, want frozen 60 in one hold", f)
	}
	// 3. Deleted by the tenant; 4. the relist delivers nothing of it.
	must(t, k8s.Delete(h.ctx, a))
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(a), a); !isNotFound(err) {
		t.Fatalf("task a still exists after its delete: %v", err)
	}
	// Time passes (the ledger's clock): ten minutes, stepped a minute at a time.
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if h.figures(l).Holds == 0 {
			return true, nil
		}
		clk.Step(time.Minute)
		return false, nil
	})
	if f := h.figures(l); err != nil || f.Holds != 0 || f.Frozen != 0 || f.Balance != 100 {
		t.Fatalf("task a is gone (deleted while the informer relisted: no event), yet the books still hold it: %+v; "+
			"want frozen 0, no hold, balance 100 once a read finds it gone", f)
	}
}

// The same for a REST create left in doubt (its connection cut after it was sent: the task
// landed, the answer lost) and settled by settleDoubt's read, not by an event (the watch is
// broken): the entry is counted from that read and confirmed once; deleted then, while the
// informer relists, nothing read it again. Failed before the fix reached confirm's reads
// (awaitEvent in confirm): held 60 for ever.
func TestARESTTaskSettledFromADoubtAndDeletedWhileTheInformerRelistedDoesNotHoldForEver(t *testing.T) {
	h := newHarness(t, 100)
	h.settle(h.l)
	clk := clocktesting.NewFakeClock(time.Now())
	var readsFail atomic.Bool // the kube-apiserver does not answer the create's re-read
	l := h.startWith(h.ctx, "ledger-1", func(c *Config) {
		c.Clock = clk
		c.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, task := obj.(*videogenv1alpha1.VideoTask); task && readsFail.Load() {
					return errors.New("the kube-apiserver did not answer")
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
	})
	h.faults.creates.Store(1) // the create lands; its answer is a cut connection
	readsFail.Store(true)
	if task, err := l.CreateTask(h.ctx, h.task("a"), 60); err == nil || !errors.Is(err, errCreateInDoubt) {
		t.Fatalf("a create whose answer was lost: %v (created: %v), want in doubt", err, task != nil)
	}
	readsFail.Store(false)
	a := &videogenv1alpha1.VideoTask{}
	must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, a))
	// settleDoubt's read (a second later on the ledger's clock) names it: held, from a read.
	named := func(context.Context) (bool, error) {
		b := l.book(h.ns)
		b.mu.Lock()
		defer b.mu.Unlock()
		e := b.tasks["a"]
		if e != nil && e.uid == a.UID && e.state == held {
			return true, nil
		}
		clk.Step(time.Second)
		return false, nil
	}
	must(t, wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, 5*time.Second, true, named))
	// Deleted; the relist delivers nothing of it.
	must(t, k8s.Delete(h.ctx, a))
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		if h.figures(l).Holds == 0 {
			return true, nil
		}
		clk.Step(time.Minute)
		return false, nil
	})
	if f := h.figures(l); err != nil || f.Holds != 0 || f.Frozen != 0 || f.Balance != 100 {
		t.Fatalf("task a is gone (deleted while the informer relisted: no event), yet the books still hold it: %+v; "+
			"want frozen 0, no hold, balance 100 once a read finds it gone", f)
	}
}
