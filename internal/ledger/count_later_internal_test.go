package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// countLater (and, the same way, CreateTask's own read
// after AlreadyExists) reads the task in its name's way OUTSIDE the account's lock, then locks
// and observes that copy if the books have no entry of the name. But "no entry" does not mean
// "never heard of it": the task may have been deleted (or closed: it leaves the open tasks'
// cache, which the informer delivers as a delete) after the read, and its delete event, which
// comes in between, found no entry to drop (the task was left out while the REST create held
// the name). observe then counts the stale copy of a task that no longer exists: a new entry
// that nothing ever removes (no event of that UID comes again). If the copy shows an admission
// (a deposed manager's late REST create of the name, priced before a template's price changed,
// so its signed annotation is not the one the new create carries), the books count it held:
// its points stay frozen for good (until a failover), the balance shown to the tenant is short
// by them, Closable refuses the account's deletion ("tasks holding points") for a task that
// does not exist, and every REST create of the name is refused as ErrTaskExists (409). With a
// kubectl task (unadmitted) the entry holds nothing, but still blocks the name's REST creates.
//
// Interleaving (manager ledger-2, elected; the "informer" fed by hand):
//  1. A deposed manager's REST create of "t" at price 5 lands late (rule 2's late create), after
//     ledger-2 built its books; its Add event is not delivered yet.
//  2. The REST client's retry of the same Idempotency-Key reaches ledger-2: CreateTask("t", 1)
//     (the template's price is now 1) counts a pending entry with no UID. While its create runs,
//     the informer's Add of the late "t" arrives: a different admission, so left out.
//  3. The create fails AlreadyExists; the kube-apiserver fails CreateTask's reads of "t" (429,
//     more than its retries): the entry goes, countLater starts.
//  4. countLater's read succeeds, returning "t" open. Right after it, the tenant deletes "t"
//     (`kubectl delete videotask t`, or the REST DELETE: it never ran, so it has no finalizer) and
//     the informer delivers the delete event: the books have no entry of "t", nothing to drop.
//  5. countLater locks the books, finds no entry of "t", observes its stale copy: held at 5.
//
// Reachable: step 1 is the late create docs/ledger.md rule 2 covers; step 2 is the left-out
// window TestAKubectlTaskLeftOutWhileARESTCreateOfItsNameRanIsNotUnknownForever pins; step 3 is the failure countLater was written for; step 4 only needs
// the delete event to be handled between countLater's read and its lock (a delete right after a
// read, the goroutine preempted or the book's lock taken by an event or a writer meanwhile), a
// narrow but real window; the same window exists in CreateTask between readTask and its relock.
//
// Suggested fix (words only): observe a copy read outside the lock only if the books cannot have
// heard of its end since: keep, per name, the resourceVersion of the last delete event that
// found no entry (a tombstone since listRV) and ignore copies not newer than it; or, after
// counting a task from such a read, read it once more and drop it if it is gone or closed.
func TestACopyCountedLaterIsNotCountedAfterItsDeletion(t *testing.T) {
	h := newHarness(t, 100)
	signer, err := NewSigner(testKey)
	must(t, err)
	late := h.task("t")
	signer.Sign(late, 5) // the deposed manager's admission, at the old price
	var failures atomic.Int32
	var deleted atomic.Bool
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		innerClient := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{innerClient}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == late.Name {
					h.feed(l, late)   // the informer's Add of the late create, while this create runs
					failures.Store(9) // more than CreateTask's own retries
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*videogenv1alpha1.VideoTask); !ok || key.Name != late.Name {
					return c.Get(ctx, key, obj, opts...)
				}
				if failures.Add(-1) >= 0 {
					return apierrors.NewTooManyRequests("the kube-apiserver is throttling", 1)
				}
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				if deleted.CompareAndSwap(false, true) {
					// Right after countLater's read: the tenant deletes "t" and the informer
					// delivers the delete before countLater takes the lock.
					gone := late.DeepCopy()
					if err := k8s.Delete(ctx, gone); err != nil {
						return err
					}
					h.feedDelete(l, gone)
				}
				return nil
			},
		})
	})
	h.l = l
	must(t, k8s.Create(h.ctx, late)) // the late create lands; its event is not delivered yet
	if _, err := l.CreateTask(h.ctx, h.task("t"), 1); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the REST create of a name in use: %v, want ErrTaskExists", err)
	}
	waitFor(t, deleted.Load)
	time.Sleep(300 * time.Millisecond) // countLater locks and decides right after its read

	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(late), &videogenv1alpha1.VideoTask{}); !isNotFound(err) {
		t.Fatalf("the task: %v, want it gone", err)
	}
	f := h.figures(l)
	_, createErr := l.CreateTask(h.ctx, h.task("t"), 1)
	if f.Frozen != 0 || f.Holds != 0 || createErr != nil {
		b := l.book(h.ns)
		b.mu.Lock()
		var st string
		if e := b.tasks["t"]; e != nil {
			st = e.state.String()
		}
		b.mu.Unlock()
		t.Fatalf("the deleted task %q is in the books (%s): figures %+v (want frozen 0, holds 0); a new REST create of its name: %v (want it created)",
			late.Name, st, f, createErr)
	}
	h.books(h.settle(l), 100, 0, 1)
}

// The same window in CreateTask itself (no kube-apiserver failure needed): the create fails
// AlreadyExists, readTask reads the task in the name's way at once (outside the lock), the
// tenant deletes it and the informer's delete event comes before CreateTask relocks (it finds
// the create's own entry, with no UID, and drops nothing); CreateTask then observes its stale
// copy: held at 5 for good. Steps and reachability as above, minus step 3.
func TestACopyReadByAFailedCreateIsNotCountedAfterItsDeletion(t *testing.T) {
	h := newHarness(t, 100)
	signer, err := NewSigner(testKey)
	must(t, err)
	late := h.task("t")
	signer.Sign(late, 5)
	var armed, deleted atomic.Bool
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		innerClient := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{innerClient}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == late.Name {
					h.feed(l, late) // the late create's Add, while this create runs: left out
					armed.Store(true)
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && key.Name == late.Name && armed.Load() && deleted.CompareAndSwap(false, true) {
					gone := late.DeepCopy()
					if err := k8s.Delete(ctx, gone); err != nil {
						return err
					}
					h.feedDelete(l, gone) // before CreateTask relocks the books
				}
				return nil
			},
		})
	})
	h.l = l
	must(t, k8s.Create(h.ctx, late))
	if _, err := l.CreateTask(h.ctx, h.task("t"), 1); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the REST create of a name in use: %v, want ErrTaskExists", err)
	}
	if !deleted.Load() {
		t.Fatal("the read after AlreadyExists did not happen")
	}
	f := h.figures(l)
	_, createErr := l.CreateTask(h.ctx, h.task("t"), 1)
	if f.Frozen != 0 || f.Holds != 0 || createErr != nil {
		t.Fatalf("the deleted task %q is in the books: figures %+v (want frozen 0, holds 0); a new REST create of its name: %v (want it created)",
			late.Name, f, createErr)
	}
	h.books(h.settle(l), 100, 0, 1)
}
