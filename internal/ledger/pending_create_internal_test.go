package ledger

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Interleavings of a REST create's pending entry (after 2cd964f and f5a77b6): each test forces one, step by step, and checks the invariants docs/ledger.md claims.

// A REST create counts its hold in a pending entry with no UID, and unlocks the books for the
// create. A copy of an earlier task of that name that comes after the task left the books (the
// controller's Observe of a status it wrote before the task was deleted, delivered after the
// informer's delete event) finds that entry and takes it over:
//
//   - a REST task's copy carrying the same signed admission (a retry of the same REST request:
//     same Idempotency-Key, so the same name and spec, and the same price, sign the very same
//     annotation) is taken for the create's task (createsTask): the entry takes the deleted
//     task's UID and moves pending -> held;
//   - a kubectl task's copy showing Frozen is another task of the name: the entry drops the
//     create's hold and then counts the deleted task's Frozen cost, as an admission the books
//     did not make (held if the balance covers it).
//
// Either way, when the create then fails (refused: a quota, a namespace being deleted; or a
// timeout whose look finds nothing), CreateTask leaves the entry alone (not pending any more, or
// no longer carrying the create's admission, and with a UID): a hold for a task that does not
// exist, kept until the books are rebuilt or another task of the name appears. Frozen never
// returns to 0, the balance stays short, and a deleted account cannot go.
//
// Interleaving: task r held; the controller writes r's status (Running) but has not yet called
// Observe; r is deleted and its delete event is delivered; a REST CreateTask of r counts its
// pending hold; the controller's Observe(r's Running copy) runs; the create is refused (403).
func TestAStaleCopyOfADeletedTaskDoesNotTakeOverAPendingCreate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kubectl bool // r was made with kubectl (held by its Frozen status), not by a REST create
	}{
		{name: "a retry of the REST request that made the deleted task"},
		{name: "a REST create of the name of a deleted kubectl task", kubectl: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			var running *videogenv1alpha1.VideoTask
			var l *Ledger
			s := h.stepped("ledger-2", func(cfg *Config) {
				inner := cfg.Client
				cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if running != nil {
							// The controller's Observe of the copy it wrote before r was deleted.
							l.Observe(running)
							return apierrors.NewForbidden(schema.GroupResource{Group: videogenv1alpha1.GroupVersion.Group, Resource: "videotasks"},
								obj.GetName(), errors.New("exceeded quota: count/videotasks.videogen.dev"))
						}
						return c.Create(ctx, obj, opts...)
					},
				})
			})
			l = s.l
			var r *videogenv1alpha1.VideoTask
			if tc.kubectl {
				r = h.task("r")
				r.Spec.Inputs.SourceVideoURL = "https://media.example/made-with-kubectl.mp4"
				must(t, k8s.Create(h.ctx, r))
				h.feed(l, r)
				must(t, admit(l, r, 10))
				cost := int64(10)
				r = h.writeStatus(l, r, func(st *videogenv1alpha1.VideoTaskStatus) {
					st.Phase, st.Charge, st.Cost = videogenv1alpha1.TaskQueued, videogenv1alpha1.ChargeFrozen, &cost
				})
			} else {
				r = h.create(l, "r", 10)
			}
			h.books(s.settle(), 100, 0, 10)

			// The controller writes r's status; its Observe is delayed.
			next := r.DeepCopy()
			next.Status.Phase = videogenv1alpha1.TaskRunning
			must(t, k8s.Status().Update(h.ctx, next))
			must(t, k8s.Delete(h.ctx, next))
			h.feedDelete(l, next) // r's hold ends
			if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 {
				t.Fatalf("figures after r's deletion: %+v, want nothing frozen", f)
			}

			running = next
			if _, err := l.CreateTask(h.ctx, h.task("r"), 10); !apierrors.IsForbidden(errors.Unwrap(err)) {
				t.Fatalf("the REST create: %v, want it refused (403)", err)
			}
			if f := h.figures(l); f.Frozen != 0 || f.Holds != 0 || f.Balance != 100 {
				t.Errorf("figures after the refused create: %+v; want frozen 0, holds 0, balance 100: no task of the name exists", f)
			}
			h.books(s.settle(), 100, 0, 0)
		})
	}
}

// rejected is the status an earlier manager's reject writes (controllers: reject): Failed, no
// charge, for a task its books found overdrawn.
func rejected(st *videogenv1alpha1.VideoTaskStatus) {
	now := metav1.Now()
	st.Phase, st.Charge, st.CompletedAt = videogenv1alpha1.TaskFailed, "", &now
	st.Error = &videogenv1alpha1.TaskError{Code: "insufficient_balance", Message: "refused by an earlier manager"}
}

// An earlier manager's late write ends a task Failed without a charge (its reject: its books
// found the task overdrawn; rule 2 lets two managers' books disagree on that), while this
// ledger counted the task, ran it and charged it. The task's status never says Deducted, so
// nothing may stay spent for it (spent = the costs of the tasks that say Deducted), and the
// journal must empty. What the ledger does depends on when the copy is seen:
//
//   - charge queued, no write on its way: the charge is taken back (spent 0, journal empty);
//   - charge carried by the write on its way (2cd964f's fate for a late refund): the fate is
//     fateCheck, and the read of the task finds a charge neither Deducted nor Refunded, so the
//     entry is never forgotten (the journal never empties, spent keeps the price);
//   - charge already in the journal: observe takes any ended status but Refunded for Deducted,
//     so the entry goes and the price stays spent for a task that says Failed.
//
// Interleaving: t held; Charge(t) queued; the earlier manager's reject lands and its event is
// observed (before the write / while the write carrying the charge is on its way / after it
// landed); Tidy; the account written.
func TestALateRejectOfACountedTaskLeavesNothingSpent(t *testing.T) {
	for _, tc := range []struct {
		name string
		when string // "queued", "writing" or "charged"
	}{
		{name: "seen while the charge is queued", when: "queued"},
		{name: "seen while the write carrying the charge is on its way", when: "writing"},
		{name: "seen after the charge landed", when: "charged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 100)
			var task *videogenv1alpha1.VideoTask
			var once atomic.Bool
			var hookErr error
			var l *Ledger
			reject := func(ctx context.Context) error {
				late := task.DeepCopy()
				rejected(&late.Status)
				if err := k8s.Status().Update(ctx, late); err != nil {
					return err
				}
				h.feed(l, late)
				return nil
			}
			s := h.stepped("ledger-2", func(cfg *Config) {
				inner := cfg.Client
				cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
					SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
						if a, ok := obj.(*videogenv1alpha1.PointAccount); ok && tc.when == "writing" && task != nil &&
							len(a.Status.Journal) > 0 && once.CompareAndSwap(false, true) {
							hookErr = reject(ctx)
						}
						return c.SubResource(sub).Update(ctx, obj, opts...)
					},
				})
			})
			l = s.l
			task = h.create(l, "t", 10)
			h.books(s.settle(), 100, 0, 10)
			s.chargeQueued(task)
			switch tc.when {
			case "queued":
				must(t, reject(h.ctx))
			case "charged":
				h.books(s.settle(), 100, 10, 0)
				must(t, reject(h.ctx))
			}
			s.settle()
			must(t, hookErr)
			if tc.when == "writing" && !once.Load() {
				t.Fatal("the reject did not land during the charge's write")
			}
			for range 3 { // as the PointAccount controller does while the journal is not empty
				l.Tidy(h.ns)
				s.settle()
			}
			a := h.account()
			if len(a.Status.Journal) != 0 {
				t.Errorf("journal %+v: want it empty", a.Status.Journal)
			}
			h.books(a, 100, 0, 0)
		})
	}
}

// 2cd964f's take-over, followed by the other task's deletion: a REST create of a name that a
// kubectl task holds a moment (its event takes the create's pending entry over, without the
// create's hold), and that task is deleted before the create reaches the kube-apiserver (its
// delete event drops the entry). The create then lands: CreateTask finds the books' entry gone,
// takes that for a rebuild, and answers 202 with nothing counted. A balance read after the 202
// does not show the freeze, another admission may take its points meanwhile, and when the
// task's event comes the books count it as an admission they did not make: overdrawn, refused
// InsufficientBalance after its 202 (docs/ledger.md allows that only for a dead manager's late
// create, or a write that reported an error).
//
// Interleaving: kubectl creates "n" (unseen); REST CreateTask("n", 60) counts a pending hold;
// the Add of the kubectl "n" takes the entry over; "n" is deleted and its delete event drops
// it; the REST create lands; CreateTask("o", 60) is admitted; the Add of the REST "n" comes.
func TestARESTCreateAnsweredAcceptedIsCountedWhenItsNameWasBrieflyTaken(t *testing.T) {
	h := newHarness(t, 100)
	kubectl := h.task("n")
	kubectl.Spec.Inputs.SourceVideoURL = "https://media.example/made-with-kubectl.mp4"
	var l *Ledger
	var once atomic.Bool
	s := h.stepped("ledger-2", func(cfg *Config) {
		inner := cfg.Client
		cfg.Client = interceptor.NewClient(withWatch{inner}, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if obj.GetName() == "n" && once.CompareAndSwap(false, true) {
					h.feed(l, kubectl) // its Add takes the pending entry over
					must(t, k8s.Delete(ctx, kubectl))
					h.feedDelete(l, kubectl)
				}
				return c.Create(ctx, obj, opts...)
			},
		})
	})
	l = s.l
	must(t, k8s.Create(h.ctx, kubectl)) // its event is not delivered yet
	n, err := l.CreateTask(h.ctx, h.task("n"), 60)
	must(t, err) // 202
	if f := h.figures(l); f.Frozen != 60 || f.Balance != 40 {
		t.Errorf("figures after the 202: %+v; want n's 60 frozen, balance 40", f)
	}
	if _, err := l.CreateTask(h.ctx, h.task("o"), 60); err == nil {
		t.Errorf("a second create of 60 with 40 left was admitted")
	}
	h.feed(l, n) // the informer's Add of the REST "n"
	if v, err := l.View(n); err != nil || v.Standing != Held {
		t.Errorf("the REST task answered 202 is %+v (%v), want Held", v, err)
	}
	s.settle()
}
