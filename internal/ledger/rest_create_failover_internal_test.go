package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// The REST admission path (after d590212) with several replicas and a failover.

// The window of rebuild_on_election_internal_test.go's TestATaskDeletedBetweenTheListAndTheWatchEndsItsHold (Start lists
// the open tasks, and adds its handlers to the task informer only after the top-ups' list and
// the install: a handler is never told of a task that left the informer before it was added),
// with another task and another loss: a charged task that closes. Its charge is in the
// account's journal; the earlier manager's last write of it (Succeeded, Deducted, closed:
// endCharged after its charge landed) lands late, after the new manager's build listed the task
// open (rule 4 counts on late writes of an earlier manager; task writes are compare-and-swaps of
// the task, which no fence stops). For the cache a close is a delete, and the handler never
// hears of it: the entry stays charged, its fate unknown, so the journal entry is never
// forgotten (Tidy reads only the sources of entries that left the books; the install's requeue
// of a charged task finds nothing in the controller's cache). The account's journal never
// empties, so a deleted account can never go (Closable), until the next failover. The case
// "informer started late" is the informer made by watch's own GetInformer (or by a controller
// started after the ledger's list): its first list comes after the close, and it never has t.
//
// Interleaving: t held, charged, its charge landed (journal: t); failover: the new ledger
// fences and lists t open (charged); the earlier manager's Deducted+closed write of t lands;
// the informer drops t (or lists without it); watch registers; the PointAccount controller
// calls Tidy.
func TestACloseBetweenTheBuildListAndTheWatchForgetsTheCharge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool
	}{
		{name: "informer running", running: true},
		{name: "informer started late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			task := h.create(h.l, "t", 60)
			h.charge(h.l, task)
			a := h.settle(h.l)
			h.books(a, 100, 60, 0)
			if len(a.Status.Journal) != 1 {
				t.Fatalf("journal %+v: want t's charge", a.Status.Journal)
			}

			l := h.startAfterList(tc.running, task, func(ctx context.Context) {
				fresh := &videogenv1alpha1.VideoTask{}
				must(t, k8s.Get(ctx, client.ObjectKeyFromObject(task), fresh))
				cost := int64(60)
				now := metav1.Now()
				fresh.Status.Phase, fresh.Status.Charge, fresh.Status.Cost = videogenv1alpha1.TaskSucceeded, videogenv1alpha1.ChargeDeducted, &cost
				fresh.Status.CompletedAt, fresh.Status.Closed = &now, true
				fresh.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/out/t.mp4"}
				must(t, k8s.Status().Update(ctx, fresh)) // the earlier manager's endCharged, landing late
			})

			deadline := time.Now().Add(3 * time.Second)
			for len(h.account().Status.Journal) != 0 && time.Now().Before(deadline) {
				l.Tidy(h.ns) // as the PointAccount controller does while the journal is not empty
				time.Sleep(50 * time.Millisecond)
			}
			a = h.account()
			if len(a.Status.Journal) != 0 {
				t.Errorf("journal %+v after t closed Deducted: want it empty (the account cannot be deleted while it is not)", a.Status.Journal)
			}
			h.books(a, 100, 60, 0)
		})
	}
}

// startAfterList starts a ledger as the elected manager does (Start, over a real cache of the
// open tasks, like the manager's), running between after its build's list of the open tasks:
// a change to task made then, which the informer processes (running: it already runs, and the
// change reaches it before the handlers are registered) or lists (not running: watch starts
// it). It returns once the ledger is ready.
func (h *harness) startAfterList(running bool, task *videogenv1alpha1.VideoTask, between func(context.Context)) *Ledger {
	t := h.t
	t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	t.Cleanup(cancel)
	informers, err := cache.New(restConfig, cache.Options{Scheme: k8s.Scheme(), ByObject: map[client.Object]cache.ByObject{
		&videogenv1alpha1.VideoTask{}: {Field: fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")},
	}})
	must(t, err)
	go func() { _ = informers.Start(ctx) }()
	if running {
		_, err := informers.GetInformer(ctx, &videogenv1alpha1.VideoTask{})
		must(t, err)
	}
	var done atomic.Bool
	reader := interceptor.NewClient(k8s, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if _, ok := list.(*videogenv1alpha1.VideoTaskList); ok && done.CompareAndSwap(false, true) {
				between(ctx) // the build's list of the open tasks has task
				if running {
					// The informer processes the change before the handlers are registered.
					waitFor(t, func() bool {
						return isNotFound(informers.Get(ctx, client.ObjectKeyFromObject(task), &videogenv1alpha1.VideoTask{}))
					})
				}
			}
			return nil
		},
	})
	signer, err := NewSigner(testKey)
	must(t, err)
	l := New(Config{Client: h.faults.client(), Reader: reader, Cache: informers, Signer: signer, Identity: "ledger-7",
		WriteInterval: 20 * time.Millisecond})
	go func() { _ = l.Start(ctx) }()
	waitFor(t, l.Ready)
	if !done.Load() {
		t.Fatal("the build never listed the open tasks")
	}
	return l
}

// A REST create whose answer is lost (the replica gave up: its context ended, or the connection
// broke after the request was sent) is looked for before its hold is dropped: CreateTask reads
// the task, and if it is not there, drops the pending entry and answers an error. If the create
// commits just after that look (the kube-apiserver was still on it), the manager's controller
// can get the task's Add before CreateTask relocks the books (the controller's and the ledger's
// handlers are two listeners of one informer, each with its own queue), and View tells it
// Held: the pending entry has no UID yet and the copy carries its signed admission. The
// controller accepts it (Frozen) and dispatches its first stage. Then CreateTask drops the
// hold; the task is counted again only when the ledger's own handler sees it, by rule 2, and
// if another admission took the points meanwhile, it is Overdrawn and refused after it ran.
// docs/ledger.md promises such a task "ends InsufficientBalance before it runs", and that "the
// controller runs and charges only tasks the ledger counts".
//
// What a user sees: a task whose stage ran at the backend (work paid for by the operator) ends
// Failed insufficient_balance with nothing charged; meanwhile the books showed frozen 0 while
// the task ran (a task running with no hold).
//
// Interleaving: REST CreateTask("t", 60) of 100 counts a pending hold and sends the create; the
// answer is lost (an error, nothing stored yet); the look (Get) answers NotFound; the create
// commits; the controller's View of its Add says Held, and it writes Frozen (its Observe is
// ignored: the entry has no UID); CreateTask drops the hold and answers an error; another
// replica's CreateTask("o", 60) is admitted; the ledger's handler gets t's Frozen copy.
// Reachable: a lost answer is what faults.creates models (here the commit just comes after
// the look); the window is the look's answer on its way back, as long as the controller's
// watch delivery and one reconcile; both handlers are on the manager's one informer.
func TestARESTTaskToldHeldWhileItsCreateIsInDoubtKeepsItsHold(t *testing.T) {
	h := newHarness(t, 100)
	var pending *videogenv1alpha1.VideoTask // the create the kube-apiserver has not committed yet
	var frozen *videogenv1alpha1.VideoTask  // the task as the controller wrote it
	var told View
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-7", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetName() == "t" {
					pending = obj.(*videogenv1alpha1.VideoTask).DeepCopy()
					return errLost // the request was sent; its answer never came
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		cfg.Reader = interceptor.NewClient(k8s, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				err := c.Get(ctx, key, obj, opts...)
				if key.Name == "t" && pending != nil && frozen == nil {
					// The look said NotFound; now the create commits, and the controller
					// reconciles its Add before CreateTask relocks the books.
					landed := pending.DeepCopy()
					must(t, k8s.Create(ctx, landed))
					v, verr := l.View(landed)
					must(t, verr)
					told = v
					if v.Standing == Held {
						cost := v.Price
						frozen = h.writeStatus(l, landed, func(st *videogenv1alpha1.VideoTaskStatus) {
							st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
						})
					}
				}
				return err
			},
		})
	})
	if _, err := l.CreateTask(h.ctx, h.task("t"), 60); err == nil {
		t.Fatal("the create whose answer was lost and whose look found nothing: want an error")
	}
	if told.Standing != Held || frozen == nil {
		// The controller waits for the ledger's own event (Unknown): the task is counted, or
		// refused, before it runs (rule 2). That holds.
		return
	}
	if f := h.figures(l); f.Frozen != 60 {
		t.Errorf("figures %+v while the controller runs t (it was told Held): want its 60 frozen", f)
	}
	if _, err := l.CreateTask(h.ctx, h.task("o"), 60); err == nil {
		t.Errorf("a second create of 60 was admitted while t, told Held, runs on the first 60 of 100")
	}
	h.feed(l, frozen) // the ledger's handler gets t (its Add, then its Frozen status)
	if v, err := l.View(frozen); err != nil || v.Standing != Held {
		t.Errorf("t, which the controller was told is Held and which runs, is now %s (%v): refused after it ran", standingName(v.Standing), err)
	}
}

func standingName(s Standing) string {
	switch s {
	case Unknown:
		return "Unknown"
	case Unadmitted:
		return "Unadmitted"
	case Held:
		return "Held"
	case Overdrawn:
		return "Overdrawn"
	}
	return fmt.Sprintf("Standing(%d)", int(s))
}

// Checked, holds (a pin): two replicas' creates, each of the whole balance, meet at the ledger;
// the second is decided while the first's create is on its way (its hold pending) and while
// that create lands but reports an error (its look finds it): exactly one is admitted, the
// other is refused 402, and the one admitted is held once. The retry of the first request with
// its Idempotency-Key (same name, same body, same signed admission) is then 409 (the apiserver
// answers it as a replay), not a second hold.
//
// Interleaving: CreateTask("a", 100) of 100 counts a pending hold; its create lands and reports
// an error; meanwhile CreateTask("b", 100) runs (402); the look finds "a": held; the ledger's
// handler gets the Add of "a"; the replica retries CreateTask("a", 100).
func TestTwoCreatesOfTheWholeBalanceAdmitOneAndARetryIsNoSecondHold(t *testing.T) {
	h := newHarness(t, 100)
	var second error
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-7", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if obj.GetName() == "a" && second == nil {
					_, second = l.CreateTask(h.ctx, h.task("b"), 100)
				}
				return err
			},
		})
	})
	h.faults.creates.Store(1) // the create of "a" lands and reports an error
	a, err := l.CreateTask(h.ctx, h.task("a"), 100)
	must(t, err)
	var short *InsufficientBalanceError
	if !errors.As(second, &short) || short.Available != 0 {
		t.Fatalf("the second create of the whole balance: %v, want 402 with 0 available", second)
	}
	h.feed(l, a)
	if _, err := l.CreateTask(h.ctx, h.task("a"), 100); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("the retry of a's request: %v, want ErrTaskExists (the apiserver's replay)", err)
	}
	if f := h.figures(l); f.Frozen != 100 || f.Holds != 1 || f.Balance != 0 {
		t.Fatalf("figures %+v: want a's 100 held once", f)
	}
	h.books(h.settle(l), 100, 0, 100)
}

// Checked, holds (a pin): a failover while a REST create is on its way. The old manager admitted
// "a" (the whole balance) and its create lands after the new manager built its books; the new
// manager admits "b" (the whole balance too) before or after its informer delivers "a". Either
// way one of them holds the balance and the other is refused (402 for "b", or "a" Overdrawn,
// refused before it runs: docs/ledger.md rule 2), never both held; the account's summary adds
// up.
//
// Interleaving: the new ledger fences and builds; the old ledger (its fence not seen yet)
// CreateTask("a", 100) lands; then either the Add of "a" and CreateTask("b", 100), or the
// reverse. Reachable: an old manager's create in flight when it lost its Lease.
func TestALateCreateOfTheOldManagerAndANewCreateNeverBothHold(t *testing.T) {
	for _, aFirst := range []bool{true, false} {
		name := "the late create seen first"
		if !aFirst {
			name = "the new create first"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 100)
			old := h.l
			h.settle(old) // its first write is done: nothing of it meets the fence before the create
			h.l = h.start(h.ctx, "ledger-2")
			a, err := old.CreateTask(h.ctx, h.task("a"), 100) // lands after the new books' list
			must(t, err)
			var bErr error
			if aFirst {
				h.feed(h.l, a)
				_, bErr = h.l.CreateTask(h.ctx, h.task("b"), 100)
			} else {
				var b *videogenv1alpha1.VideoTask
				b, bErr = h.l.CreateTask(h.ctx, h.task("b"), 100)
				h.feed(h.l, a)
				if bErr == nil {
					h.feed(h.l, b)
				}
			}
			va, err := h.l.View(a)
			must(t, err)
			held := 0
			if va.Standing == Held {
				held++
			}
			if bErr == nil {
				held++
			}
			if held != 1 {
				t.Fatalf("a is %s, b's create: %v: want exactly one of them holding the 100", standingName(va.Standing), bErr)
			}
			if f := h.figures(h.l); f.Frozen != 100 || f.Holds != 1 || f.Balance != 0 {
				t.Fatalf("figures %+v: want one hold of 100", f)
			}
			h.books(h.settle(h.l), 100, 0, 100)
		})
	}
}

// A REST create that fails
// AlreadyExists reads the task that has the name and counts it. If that task is closed (its
// close already took it out of the open tasks' cache, whose delete event dropped its entry),
// counting it made a settled entry that nothing removes: the cache never brings a closed task
// back, so no delete event comes, and every later create of the name, once the finished-task
// collector deleted the task, was refused as a task that exists (a replay of a task that is
// gone) until the next failover.
func TestAClosedTaskReadByAFailedCreateLeavesNoEntry(t *testing.T) {
	h := newHarness(t, 100)
	closed := h.task("x")
	must(t, k8s.Create(h.ctx, closed))
	ended(videogenv1alpha1.ChargeRefunded, videogenv1alpha1.TaskFailed, true)(&closed.Status)
	must(t, k8s.Status().Update(h.ctx, closed))
	if _, err := h.l.CreateTask(h.ctx, h.task("x"), 10); !errors.Is(err, ErrTaskExists) {
		t.Fatalf("a create of a name a closed task has: %v, want ErrTaskExists", err)
	}
	must(t, k8s.Delete(h.ctx, closed)) // the collector, at the TTL; the cache hears nothing
	if _, err := h.l.CreateTask(h.ctx, h.task("x"), 10); err != nil {
		t.Fatalf("a create of the name once the closed task is gone: %v, want it created", err)
	}
	h.books(h.settle(h.l), 100, 0, 10)
}

// The controller asking about a REST task before the create's answer came is told Unknown (see
// above), and is not left to its 200 ms requeue: the ledger requeues the task as soon as the
// answer names it.
func TestATaskAskedAboutBeforeItsCreateAnsweredIsRequeuedWhenItIs(t *testing.T) {
	h := newHarness(t, 100)
	var told View
	var l *Ledger
	l = h.startWith(h.ctx, "ledger-2", func(cfg *Config) {
		cfg.Client = interceptor.NewClient(withWatch{cfg.Client}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && err == nil {
					// The controller's informer brings the task before the answer comes.
					told, err = l.View(task.DeepCopy())
				}
				return err
			},
		})
	})
	task := h.create(l, "t", 10)
	if told.Standing != Unknown {
		t.Fatalf("asked before the create's answer: %+v, want Unknown", told)
	}
	select {
	case ev := <-l.TaskEvents():
		if ev.Object.GetName() != task.Name {
			t.Fatalf("requeued %s, want %s", ev.Object.GetName(), task.Name)
		}
	default:
		t.Fatal("the task the controller asked about was not requeued once its create answered")
	}
	if v, err := l.View(task); err != nil || v.Standing != Held {
		t.Fatalf("after the answer: %+v %v, want Held", v, err)
	}
}
