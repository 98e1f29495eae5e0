package ledger

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// These tests drive the ledger against a real kube-apiserver and etcd, but feed it its events
// by hand: each test chooses which copy of a task the "informer" delivers and when (a lagging
// cache), and which writes land but report an error (interceptor), so every interleaving the
// argument in docs/ledger.md covers is forced, not hoped for.

var (
	k8s        client.WithWatch
	restConfig *rest.Config // for the tests that run Start with a real cache
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // the fuzz target needs no control plane
	}
	env, cfg, _, err := testenv.Start()
	restConfig = cfg
	if err == nil {
		k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	}
	if err == nil {
		k8s = interceptor.NewClient(k8s, interceptor.Funcs{Create: withLedgerFinalizer})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// withLedgerFinalizer puts FinalizerLedger on every PointTopUp the tests create, right after
// its create, as the PointTopUp controller does before it asks the ledger to apply one
// (ApplyTopUp queues nothing for a top-up without it): the tests drive the ledger without the
// controller. Not in the create itself: a policy refuses that, as a copy from an export.
func withLedgerFinalizer(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	tu, ok := obj.(*videogenv1alpha1.PointTopUp)
	if !ok {
		return c.Create(ctx, obj, opts...)
	}
	if err := c.Create(ctx, tu, opts...); err != nil {
		return err
	}
	controllerutil.AddFinalizer(tu, videogenv1alpha1.FinalizerLedger)
	return c.Update(ctx, tu)
}

var testKey = []byte("ledger-test-signing-key-0123456789abcdef")

// faults makes chosen writes land and then report an error, as a timeout after the commit does.
type faults struct {
	// landThenFail counts down: while positive, matching writes land and return an error.
	accountUpdates atomic.Int32
	creates        atomic.Int32

	mu       sync.Mutex
	mismatch []string // account summaries written that do not add up
}

// check records a written account summary whose figures disagree: every test's tasks cost
// more than 0, so tasks hold points exactly when points are frozen.
func (f *faults) check(a *videogenv1alpha1.PointAccount) {
	st := a.Status
	if st.Balance != st.Credited-st.Spent-st.Frozen || (st.Holds == 0) != (st.Frozen == 0) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.mismatch = append(f.mismatch, fmt.Sprintf("balance %d credited %d spent %d frozen %d holds %d",
			st.Balance, st.Credited, st.Spent, st.Frozen, st.Holds))
	}
}

var errLost = errors.New("the connection was lost after the request was sent")

func (f *faults) client() client.Client {
	return interceptor.NewClient(k8s, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			if _, ok := obj.(*videogenv1alpha1.VideoTask); ok && err == nil && f.creates.Add(-1) >= 0 {
				return errLost
			}
			return err
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if a, ok := obj.(*videogenv1alpha1.PointAccount); ok && err == nil {
				f.check(a)
				if f.accountUpdates.Add(-1) >= 0 {
					return errLost
				}
			}
			return err
		},
	})
}

// harness is one ledger over one fresh account, with its events fed by hand.
type harness struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	l      *Ledger
	faults *faults
}

func newHarness(t *testing.T, credited int64) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := "t-" + string(uuid.NewUUID())[:8]
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
	must(t, k8s.Create(ctx, acct))
	if credited > 0 {
		acct.Status.Credited, acct.Status.Balance = credited, credited
		must(t, k8s.Status().Update(ctx, acct))
	}
	h := &harness{t: t, ctx: ctx, ns: ns, faults: &faults{}}
	t.Cleanup(func() {
		h.faults.mu.Lock()
		defer h.faults.mu.Unlock()
		for _, m := range h.faults.mismatch {
			t.Errorf("the ledger wrote an account summary that does not add up: %s", m)
		}
	})
	h.l = h.start(ctx, "ledger-1")
	return h
}

// start builds a ledger's books as Start does, without an informer: events come from feed.
func (h *harness) start(ctx context.Context, identity string) *Ledger {
	return h.startWith(ctx, identity, nil)
}

// startWith is start with the config changed by configure first (another reader, a clock).
func (h *harness) startWith(ctx context.Context, identity string, configure func(*Config)) *Ledger {
	h.t.Helper()
	signer, err := NewSigner(testKey)
	must(h.t, err)
	cfg := Config{Client: h.faults.client(), Reader: k8s, Signer: signer, Identity: identity, WriteInterval: 20 * time.Millisecond}
	if configure != nil {
		configure(&cfg)
	}
	l := New(cfg)
	l.ctx = ctx
	must(h.t, l.build(ctx, h.ns))
	l.ready.Store(true)
	go l.sweepUnevented(ctx) // as Start does once the books are built
	return l
}

// outcome has l apply tu, waiting out the books' (re)build and the account's next write; it
// writes no status (reapply does).
func (h *harness) outcome(l *Ledger, tu *videogenv1alpha1.PointTopUp) TopUpOutcome {
	h.t.Helper()
	var out TopUpOutcome
	waitFor(h.t, func() bool {
		var err error
		if out, err = l.ApplyTopUp(tu); errors.Is(err, ErrNotReady) {
			return false
		}
		must(h.t, err)
		return !out.Queued
	})
	return out
}

// emptyAndClose applies a credit and the debit that empties the account again through h.l,
// writes their statuses as the PointTopUp controller does, and waits until the account may
// close: an old tenant's account, before its namespace goes. It returns the account.
func (h *harness) emptyAndClose(credit, debit *videogenv1alpha1.PointTopUp) *videogenv1alpha1.PointAccount {
	h.t.Helper()
	for _, tu := range []*videogenv1alpha1.PointTopUp{credit, debit} {
		if out := h.outcome(h.l, tu); !out.Applied {
			h.t.Fatalf("%s: %+v", tu.Name, out)
		}
	}
	acct := h.settle(h.l)
	for _, tu := range []*videogenv1alpha1.PointTopUp{credit, debit} {
		tu.Status.AppliedAt, tu.Status.AccountUID = ptrNow(), acct.UID
		must(h.t, k8s.Status().Update(h.ctx, tu))
		h.l.ObserveTopUp(tu)
	}
	h.books(h.settle(h.l), 0, 0, 0)
	must(h.t, h.l.Closable(h.ns))
	return acct
}

// feed delivers a copy of a task to the ledger as its informer would.
func (h *harness) feed(l *Ledger, t *videogenv1alpha1.VideoTask) { l.taskEvent(t.DeepCopy(), false) }

// feedDelete delivers a delete event (a deletion, or the task leaving the open tasks' cache).
func (h *harness) feedDelete(l *Ledger, t *videogenv1alpha1.VideoTask) {
	l.taskEvent(t.DeepCopy(), true)
}

func (h *harness) task(name string) *videogenv1alpha1.VideoTask {
	return &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser,
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/" + name + ".mp4"}},
	}
}

// create admits and creates a task through the ledger, as the REST API does.
func (h *harness) create(l *Ledger, name string, price int64) *videogenv1alpha1.VideoTask {
	h.t.Helper()
	t, err := l.CreateTask(h.ctx, h.task(name), price)
	must(h.t, err)
	return t
}

// writeStatus writes a task's status as the controller does, and tells the ledger.
func (h *harness) writeStatus(l *Ledger, t *videogenv1alpha1.VideoTask, mutate func(*videogenv1alpha1.VideoTaskStatus)) *videogenv1alpha1.VideoTask {
	h.t.Helper()
	t = t.DeepCopy()
	mutate(&t.Status)
	if t.Status.Phase == videogenv1alpha1.TaskSucceeded && t.Status.Result == nil {
		t.Status.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"} // the status rules want one
	}
	must(h.t, k8s.Status().Update(h.ctx, t))
	l.Observe(t)
	return t
}

// account reads the account from the kube-apiserver.
func (h *harness) account() *videogenv1alpha1.PointAccount {
	h.t.Helper()
	a := &videogenv1alpha1.PointAccount{}
	must(h.t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: videogenv1alpha1.PointAccountName}, a))
	return a
}

// figures are the ledger's own figures.
func (h *harness) figures(l *Ledger) Figures {
	h.t.Helper()
	f, err := l.Balance(h.ctx, h.ns)
	must(h.t, err)
	return f
}

// settle waits until the account's status caught up with the books (nothing queued, written).
func (h *harness) settle(l *Ledger) *videogenv1alpha1.PointAccount {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		b := l.book(h.ns)
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.flushing && !b.dirty && len(b.queued) == 0, nil
	})
	must(h.t, err)
	return h.account()
}

// charge charges a held task and waits for the account write.
func (h *harness) charge(l *Ledger, t *videogenv1alpha1.VideoTask) {
	h.t.Helper()
	result := &videogenv1alpha1.TaskResult{URL: "https://media.example/out/" + t.Name + ".mp4"}
	err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return l.Charge(t, result)
	})
	must(h.t, err)
}

// books checks the account's status against the invariant and the figures the test expects.
func (h *harness) books(a *videogenv1alpha1.PointAccount, credited, spent, frozen int64) {
	h.t.Helper()
	st := a.Status
	if st.Credited != credited || st.Spent != spent || st.Frozen != frozen || st.Balance != credited-spent-frozen {
		h.t.Fatalf("account: credited %d spent %d frozen %d balance %d; want credited %d spent %d frozen %d balance %d",
			st.Credited, st.Spent, st.Frozen, st.Balance, credited, spent, frozen, credited-spent-frozen)
	}
}

// booksClosed is books, and the journal empty: every entry's source has shown it.
func (h *harness) booksClosed(a *videogenv1alpha1.PointAccount, credited, spent, frozen int64) {
	h.t.Helper()
	h.books(a, credited, spent, frozen)
	if len(a.Status.Journal) != 0 {
		h.t.Fatalf("journal %+v: want it empty", a.Status.Journal)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ended(charge videogenv1alpha1.ChargeState, phase videogenv1alpha1.TaskPhase, closed bool) func(*videogenv1alpha1.VideoTaskStatus) {
	return func(st *videogenv1alpha1.VideoTaskStatus) {
		now := metav1.Now()
		st.Phase, st.Charge, st.Closed, st.CompletedAt = phase, charge, closed, &now
		if phase == videogenv1alpha1.TaskSucceeded && st.Result == nil {
			st.Result = &videogenv1alpha1.TaskResult{URL: "https://media.example/out.mp4"} // the status rules want one
		}
		if st.Cost == nil {
			var c int64 = 10
			st.Cost = &c
		}
	}
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// admit is the controller's Admit: against the account whose books the task is in now, as the
// View the controller read just before would name it.
func admit(l *Ledger, t *videogenv1alpha1.VideoTask, price int64) error {
	b := l.book(t.Namespace)
	b.mu.Lock()
	var account types.UID
	if b.account != nil {
		account = b.account.UID
	}
	b.mu.Unlock()
	return l.Admit(t, price, account)
}

// admitWhenReady asks Admit again while it answers ErrNotReady, as the controllers' requeues
// do, and returns its first other answer.
func admitWhenReady(h *harness, t *videogenv1alpha1.VideoTask, price int64) error {
	h.t.Helper()
	var err error
	must(h.t, wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		err = admit(h.l, t, price)
		return !errors.Is(err, ErrNotReady), nil
	}))
	return err
}
