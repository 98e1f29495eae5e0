package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Config is what a Ledger needs.
type Config struct {
	// Client writes: the tasks the ledger creates, and PointAccount status.
	Client client.Client
	// Reader reads around any cache: the books are built from it, and doubtful writes checked.
	Reader client.Reader
	// Cache delivers the events of VideoTasks and PointAccounts (the manager's cache).
	Cache cache.Cache
	// Signer signs the admissions of the tasks the ledger creates.
	Signer *Signer
	// Identity names this manager in status.authority (unique per process).
	Identity string
	// WriteInterval is the least time between two writes of one account (default 1 s): the
	// charges and top-ups that come meanwhile share the next write. One that carries the
	// charge of every task the account holds, none of them come since the last write, goes at
	// once: nothing more would share it.
	WriteInterval time.Duration
	Clock         clock.WithTicker
	Logger        logr.Logger
	// Lease, if set, reads this manager's leader Lease from the kube-apiserver: whether this
	// manager holds it, and in which term. Fences are ordered by it (see docs/ledger.md): the
	// books are built in one term, read before and after the fences; a manager whose Lease is
	// another's, or of another term, stops; and only within its term does a manager write
	// over a fence it finds, which can then only be that of a manager deposed before it. Nil
	// when the manager runs without leader election: then the latest fence wins.
	Lease func(context.Context) (LeaseTerm, error)
	// Recorder, if set, tells an account's readers (kubectl describe) when the ledger puts its
	// figures back over a status somebody else wrote.
	Recorder events.EventRecorder
}

// LeaseTerm is what the leader Lease says of this manager: whether it holds the Lease, and the
// Lease's count of holder changes, which names the term (a manager that lost the Lease and
// took it again holds it in a later term).
type LeaseTerm struct {
	Held        bool
	Transitions int64
}

// Ledger is the one authority over points: it runs in the elected manager only (Start). See
// docs/ledger.md for why what it does is exact.
type Ledger struct {
	cfg   Config
	ready atomic.Bool
	ctx   context.Context // Start's: the account writers run in it

	// term is the Lease term the books are built in (the first read of the Lease); termSet
	// once it is known.
	termMu  sync.Mutex
	term    int64
	termSet bool

	// deposed is closed (once, with deposedBy set) when another manager fences an account.
	deposed     chan struct{}
	deposedOnce sync.Once
	deposedBy   error

	mu    sync.Mutex
	books map[string]*book

	// Requeues of objects whose next step the ledger just made possible (a charge landed, a
	// top-up applied, an overdrawn task found): the controllers watch these channels.
	tasks    chan event.GenericEvent
	topUps   chan event.GenericEvent
	accounts chan event.GenericEvent
}

// New returns a Ledger; it does nothing until Start.
func New(cfg Config) *Ledger {
	if cfg.WriteInterval <= 0 {
		cfg.WriteInterval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &Ledger{
		cfg:      cfg,
		books:    map[string]*book{},
		deposed:  make(chan struct{}),
		tasks:    make(chan event.GenericEvent, 1024),
		topUps:   make(chan event.GenericEvent, 256),
		accounts: make(chan event.GenericEvent, 256),
	}
}

// TaskEvents, TopUpEvents and AccountEvents carry requeues for the controllers.
func (l *Ledger) TaskEvents() <-chan event.GenericEvent    { return l.tasks }
func (l *Ledger) TopUpEvents() <-chan event.GenericEvent   { return l.topUps }
func (l *Ledger) AccountEvents() <-chan event.GenericEvent { return l.accounts }

// Admitted reports whether the task carries this ledger's valid admission record: it was
// made by the ledger for the REST API, with the spec it has now. The annotation's presence
// alone proves nothing where the admission policies are off.
func (l *Ledger) Admitted(task *videogenv1alpha1.VideoTask) bool {
	_, ok := l.cfg.Signer.Admitted(task)
	return ok
}

// Ready reports whether the ledger has built its books and keeps them.
func (l *Ledger) Ready() bool { return l.ready.Load() }

// NeedLeaderElection: only the elected manager keeps the books.
func (l *Ledger) NeedLeaderElection() bool { return true }

// Start builds the books of every account (each after its fence write) and keeps them until
// ctx ends, or until another manager fences one of them: then it returns ErrFenced, which stops
// the manager (its Deployment restarts it, and it campaigns again).
func (l *Ledger) Start(ctx context.Context) error {
	log := l.cfg.Logger
	l.ctx = ctx
	accounts := &videogenv1alpha1.PointAccountList{}
	if err := l.cfg.Reader.List(ctx, accounts); err != nil {
		return fmt.Errorf("ledger: listing accounts: %w", err)
	}
	// Every account's books are kept from here, so requests wait for them, and so do events:
	// each book stays locked until it is installed. The handlers are added first, so that
	// every change after the lists below reaches the books (a handler added later hears only
	// of what its informer holds then: a task deleted or closed in between would be lost); an
	// event older than the lists is ignored once the books are in place.
	locked := make([]*book, 0, len(accounts.Items))
	defer func() {
		for _, b := range locked {
			b.building = false
			b.mu.Unlock()
		}
	}()
	for i := range accounts.Items {
		b := l.book(accounts.Items[i].Namespace)
		b.mu.Lock()
		b.building = true
		locked = append(locked, b)
	}
	if err := l.watch(ctx); err != nil {
		return err
	}
	// First the fence writes, side by side (a failover with many accounts waits for the slowest
	// write, not the sum); then one list of all open tasks and top-ups, which sees every write
	// an earlier manager made before its fence.
	fenced := make([]*videogenv1alpha1.PointAccount, len(accounts.Items))
	if err := l.inTerm(ctx); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range accounts.Items {
		g.Go(func() (err error) {
			fenced[i], err = l.takeOver(gctx, &accounts.Items[i])
			if err != nil {
				return fmt.Errorf("ledger: taking over account %q: %w", accounts.Items[i].Namespace, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := l.inTerm(ctx); err != nil {
		return err // a later term began during the fences: another manager may have written meanwhile
	}
	tasks, listRV, err := l.openTasks(ctx)
	if err != nil {
		return err
	}
	topUps := &videogenv1alpha1.PointTopUpList{}
	if err := l.cfg.Reader.List(ctx, topUps); err != nil {
		return fmt.Errorf("ledger: listing top-ups: %w", err)
	}
	tasksOf, topUpsOf := map[string][]videogenv1alpha1.VideoTask{}, map[string][]videogenv1alpha1.PointTopUp{}
	for _, t := range tasks {
		tasksOf[t.Namespace] = append(tasksOf[t.Namespace], t)
	}
	for _, t := range topUps.Items {
		topUpsOf[t.Namespace] = append(topUpsOf[t.Namespace], t)
	}
	for _, acct := range fenced {
		if acct == nil {
			continue // deleted meanwhile: its event rebuilds the namespace's books
		}
		l.install(l.book(acct.Namespace), acct, tasksOf[acct.Namespace], topUpsOf[acct.Namespace], listRV)
	}
	for _, b := range locked {
		b.building = false
		b.mu.Unlock()
	}
	locked = nil
	l.ready.Store(true)
	go l.sweepUnevented(ctx)
	log.Info("ledger books built", "accounts", len(accounts.Items), "openTasks", len(tasks), "identity", l.cfg.Identity)
	select {
	case <-ctx.Done():
		l.ready.Store(false)
		return nil
	case <-l.deposed:
		if ctx.Err() != nil {
			return nil // stopping anyway: a fence seen on the way out is no failure
		}
		return l.deposedBy
	}
}

// build (re)builds one account's books, for an account that appears while the ledger runs:
// first the fence write, then the account's open tasks and top-ups, read from the
// kube-apiserver.
func (l *Ledger) build(ctx context.Context, namespace string) error {
	b := l.book(namespace)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.building = true
	defer func() { b.building = false }()
	current := &videogenv1alpha1.PointAccount{}
	err := l.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: videogenv1alpha1.PointAccountName}, current)
	if apierrors.IsNotFound(err) {
		l.install(b, nil, nil, nil, "")
		return nil
	}
	if err != nil {
		return err
	}
	if b.built && b.account != nil && b.account.UID == current.UID {
		// Built already, by another rebuild of this account (an event that came while this
		// one waited to try again): those books are live, and a list now would miss what
		// they count that is on its way (a REST create's hold).
		return nil
	}
	if err := l.inTerm(ctx); err != nil {
		return err
	}
	acct, err := l.takeOver(ctx, current)
	if err != nil {
		return fmt.Errorf("ledger: taking over account %q: %w", namespace, err)
	}
	if err := l.inTerm(ctx); err != nil {
		return err
	}
	tasks, listRV, err := l.openTasks(ctx, client.InNamespace(namespace))
	if err != nil {
		return err
	}
	topUps := &videogenv1alpha1.PointTopUpList{}
	if err := l.cfg.Reader.List(ctx, topUps, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("ledger: listing top-ups of %q: %w", namespace, err)
	}
	l.install(b, acct, tasks, topUps.Items, listRV)
	return nil
}

// install puts books built from an account (fenced, nil if there is none), its open tasks and
// its top-ups, listed at listRV, in place. Call it with b.mu held.
func (l *Ledger) install(b *book, acct *videogenv1alpha1.PointAccount, tasks []videogenv1alpha1.VideoTask,
	topUps []videogenv1alpha1.PointTopUp, listRV string) {
	fresh := newBook(b.namespace)
	fresh.account = acct
	open := map[types.UID]bool{}
	for i := range tasks {
		open[tasks[i].UID] = true
	}
	if acct != nil {
		for _, j := range acct.Status.Journal {
			if j.Kind == videogenv1alpha1.JournalCharge && !open[j.UID] {
				fresh.fates[j.UID] = fateCheck // closed or gone since: read it before forgetting
			}
		}
		credited := map[types.UID]bool{} // a hand-written refusal does not hide a credit
		for _, j := range acct.Status.Journal {
			credited[j.UID] = j.Kind == videogenv1alpha1.JournalTopUp
		}
		for i := range topUps {
			t := &topUps[i]
			switch {
			case t.RefusedForGood() && !credited[t.UID]:
				if c := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); c.Reason == videogenv1alpha1.ReasonDebitExceedsBalance {
					fresh.refusals[t.UID] = c.Message
				}
				fresh.topUpsShown[t.UID] = true
			case t.Status.AppliedAt == nil:
			case t.Status.AccountUID == acct.UID:
				fresh.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference}
				fresh.topUpsShown[t.UID] = true
			default:
				// Applied to an earlier account of the namespace: a reference is used for good.
				// An applied top-up cannot be deleted, and an account goes only once every
				// top-up's status shows it applied, so this list has them all. One of the
				// current account, in the list before or after, names the reference instead.
				if _, used := fresh.references[referenceKey(t)]; !used {
					fresh.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference, earlier: true}
				}
			}
		}
		for _, j := range acct.Status.Journal {
			switch j.Kind {
			case videogenv1alpha1.JournalTopUp:
				if t := findTopUp(topUps, j.UID); t != nil {
					fresh.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference}
				}
			case videogenv1alpha1.JournalRefusal:
				if _, known := fresh.refusals[j.UID]; !known {
					fresh.refusals[j.UID] = "Refused: the debit exceeded the points available; nothing was debited"
				}
			}
		}
	}
	// In creation order, so that if the tasks shown admitted do not all fit (only a manager
	// that kept acting after it lost its election could make that happen), the newest wait.
	slices.SortStableFunc(tasks, func(a, b videogenv1alpha1.VideoTask) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for i := range tasks {
		// Counted from a list: a task the informer's store never held (its watch fell behind
		// and relisted, 410) may be deleted with no event at all, so it is read again until
		// an event names it (sweepUnevented), as one counted from a create's answer is.
		if e := fresh.observe(&tasks[i], l.evidence(&tasks[i])); e != nil && e.uid == tasks[i].UID {
			l.awaitEvent(e)
		}
	}
	fresh.listRV = listRV // from now on, a task not in the books must be newer than the list
	b.load(fresh)
	l.schedule(b)
	for name, e := range b.tasks {
		if e.state == overdrawn || e.state == charged {
			l.requeueTask(b.namespace, name)
		}
	}
}

func findTopUp(items []videogenv1alpha1.PointTopUp, uid types.UID) *videogenv1alpha1.PointTopUp {
	for i := range items {
		if items[i].UID == uid {
			return &items[i]
		}
	}
	return nil
}

// takeOver writes this manager's name into the account (a compare-and-swap, from the copy given
// and then from fresh reads): from then on no write of an earlier manager can land. It returns
// the account as written, or nil if it is gone. Its callers read the Lease before and after
// (inTerm): a fence written out of term, which may have landed over the elected manager's, is
// the last thing its manager writes, and it changed only the authority.
func (l *Ledger) takeOver(ctx context.Context, acct *videogenv1alpha1.PointAccount) (*videogenv1alpha1.PointAccount, error) {
	acct = acct.DeepCopy()
	key := client.ObjectKeyFromObject(acct)
	for {
		if acct.Status.Authority == l.cfg.Identity {
			return acct, nil
		}
		acct.Status.Authority = l.cfg.Identity
		err := l.cfg.Client.Status().Update(ctx, acct)
		switch {
		case err == nil:
			return acct, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case !apierrors.IsConflict(err):
			// The write may have landed: read again, and write again if it did not.
			if err := sleep(ctx, l.cfg.Clock, 100*time.Millisecond); err != nil {
				return nil, err
			}
		}
		acct = &videogenv1alpha1.PointAccount{}
		if err := l.cfg.Reader.Get(ctx, key, acct); apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
}

// errLostElection: this manager's Lease is another's, or was another's since the books were
// built.
var errLostElection = fmt.Errorf("%w: this manager's leader Lease changed hands since it built its books", ErrFenced)

// inTerm reads the Lease (Config.Lease): nil if this manager holds it in the term its books are
// built in (the first read's), or runs without one. Within one term no other manager was
// elected, so nobody else wrote an account but a deposed manager's late fence.
func (l *Ledger) inTerm(ctx context.Context) error {
	if l.cfg.Lease == nil {
		return nil
	}
	t, err := l.cfg.Lease(ctx)
	if err != nil {
		return fmt.Errorf("reading the leader Lease: %w", err)
	}
	l.termMu.Lock()
	defer l.termMu.Unlock()
	if !l.termSet && t.Held {
		l.term, l.termSet = t.Transitions, true
	}
	if !t.Held || t.Transitions != l.term {
		return errLostElection
	}
	return nil
}

// openTasksSelector selects the tasks that are not closed: a closed task is settled.
var openTasksSelector = fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")

// openTasks lists the open tasks (of a namespace, with client.InNamespace) from the
// kube-apiserver, page by page, and the resourceVersion of the list.
func (l *Ledger) openTasks(ctx context.Context, scope ...client.ListOption) ([]videogenv1alpha1.VideoTask, string, error) {
	var out []videogenv1alpha1.VideoTask
	var rv string
	opts := append([]client.ListOption{client.Limit(500), client.MatchingFieldsSelector{Selector: openTasksSelector}}, scope...)
	for cont := ""; ; {
		page := &videogenv1alpha1.VideoTaskList{}
		if err := l.cfg.Reader.List(ctx, page, append(opts, client.Continue(cont))...); err != nil {
			return nil, "", fmt.Errorf("ledger: listing open tasks: %w", err)
		}
		if rv == "" {
			rv = page.ResourceVersion
		}
		out = append(out, page.Items...)
		if cont = page.Continue; cont == "" {
			return out, rv, nil
		}
	}
}

// book returns namespace's books, made (not built) if need be.
func (l *Ledger) book(namespace string) *book {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.books[namespace]
	if b == nil {
		b = newBook(namespace)
		l.books[namespace] = b
	}
	return b
}

// lockBook returns namespace's books locked, or ErrNotReady while they are not kept here.
// Books never built are those of a namespace without an account (every account's are built at
// Start or when it appears). Unlock b.mu when done.
func (l *Ledger) lockBook(namespace string) (*book, error) {
	if !l.ready.Load() {
		return nil, errNotKept
	}
	b := l.book(namespace)
	b.mu.Lock()
	switch {
	case b.fenced:
		b.mu.Unlock()
		return nil, errNotKept
	case b.building:
		b.mu.Unlock()
		return nil, errAccountLags // a new or replaced account's books
	}
	return b, nil
}

// evidence reads what a task's copy says about its points.
func (l *Ledger) evidence(t *videogenv1alpha1.VideoTask) evidence {
	ev := evidence{settledAs: t.Status.Charge}
	switch {
	case t.Status.Charge == videogenv1alpha1.ChargeDeducted || t.Status.Charge == videogenv1alpha1.ChargeRefunded,
		t.Status.Phase.Terminal(), t.Status.Closed:
		ev.ended = true
	case t.Status.Charge == videogenv1alpha1.ChargeFrozen && t.Status.Cost != nil:
		ev.admitted, ev.price = true, *t.Status.Cost
	default:
		if p, ok := l.cfg.Signer.Admitted(t); ok {
			ev.admitted, ev.price = true, p
		}
	}
	return ev
}

// watch follows the tasks and accounts in the manager's cache. Its events only bring what
// others did; copies older than the books are ignored (book.observe).
func (l *Ledger) watch(ctx context.Context) error {
	taskInformer, err := l.cfg.Cache.GetInformer(ctx, &videogenv1alpha1.VideoTask{})
	if err != nil {
		return err
	}
	if _, err := taskInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.taskEvent(obj, false) },
		UpdateFunc: func(_, obj any) { l.taskEvent(obj, false) },
		DeleteFunc: func(obj any) { l.taskEvent(obj, true) },
	}); err != nil {
		return err
	}
	acctInformer, err := l.cfg.Cache.GetInformer(ctx, &videogenv1alpha1.PointAccount{})
	if err != nil {
		return err
	}
	_, err = acctInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.accountEvent(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { l.accountEvent(ctx, obj, false) },
		DeleteFunc: func(obj any) { l.accountEvent(ctx, obj, true) },
	})
	return err
}

func (l *Ledger) taskEvent(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	t, ok := obj.(*videogenv1alpha1.VideoTask)
	if !ok {
		return
	}
	b := l.book(t.Namespace)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built || b.account == nil {
		return // no account: nothing is held, and a new account's books are built from a fresh list
	}
	if deleted {
		// Deleted, or closed (and so out of the cache's selection): either way its hold ends.
		if e := b.tasks[t.Name]; e != nil && e.uid == t.UID {
			b.drop(t.Name)
			l.schedule(b)
		}
		return
	}
	before := b.tasks[t.Name]
	var was state
	if before != nil {
		was = before.state
	}
	e := b.observe(t, l.evidence(t))
	if e != nil && e.uid == t.UID {
		e.evented = true
	}
	switch {
	case e != nil && e.state == overdrawn && (before == nil || was != overdrawn):
		l.requeueTask(t.Namespace, t.Name)
	case e != nil && e.asked && e.uid != "":
		e.asked = false
		l.requeueTask(t.Namespace, t.Name) // the controller waits for this task's UID
	}
	if b.dirty {
		l.schedule(b)
	}
}

func (l *Ledger) accountEvent(ctx context.Context, obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	a, ok := obj.(*videogenv1alpha1.PointAccount)
	if !ok {
		return
	}
	b := l.book(a.Namespace)
	b.mu.Lock()
	switch {
	case deleted:
		// Gone: its finalizer let it go only when empty. Its tasks (none hold points) and a new
		// account of that name are another story.
		if b.account != nil && b.account.UID == a.UID {
			b.load(newBook(a.Namespace))
			b.dirty = false
		}
	case b.account != nil && b.account.UID != a.UID && !newer(a.ResourceVersion, b.account.ResourceVersion):
		// An old copy of an earlier account of that name.
	case b.account == nil || b.account.UID != a.UID:
		if !b.building {
			// A new account (or a new one of the same name): build its books.
			b.building = true
			go l.rebuild(ctx, a.Namespace)
		}
	case newer(a.ResourceVersion, b.account.ResourceVersion) && a.Status.Authority != l.cfg.Identity:
		// Another manager took the account over (its fence write): stop deciding for it. With a
		// Lease, the next write asks it first (commit): the fence may be that of a manager
		// elected before this one, landed late.
		switch {
		case b.fenced:
		case l.cfg.Lease == nil:
			l.stepDown(b, a.Status.Authority)
		default:
			b.dirty = true
			l.schedule(b)
		}
	case b.writing:
		// Most likely the writer's own write, landed before its answer: the writer decides
		// when the answer comes (seen). An administrator's suspension or deletion stops new
		// tasks at once all the same: accepting reads them from the books' account.
		if newer(a.ResourceVersion, b.seenRV) {
			b.seenRV, b.seen = a.ResourceVersion, a.DeepCopy()
		}
		if newer(a.ResourceVersion, b.account.ResourceVersion) {
			b.account.Spec, b.account.DeletionTimestamp = *a.Spec.DeepCopy(), a.DeletionTimestamp.DeepCopy()
		}
	case newer(a.ResourceVersion, b.account.ResourceVersion):
		// An administrator changed the spec (suspended) or deleted it. The status is the
		// ledger's alone: the books keep theirs, and the next write carries it over any edit.
		if !equality.Semantic.DeepEqual(a.Status, b.account.Status) {
			l.cfg.Logger.Info("the account's status was written by someone else; the ledger writes its books' figures back",
				"namespace", a.Namespace, "credited", a.Status.Credited, "spent", a.Status.Spent,
				"books' credited", b.account.Status.Credited, "books' spent", b.account.Status.Spent)
			if l.cfg.Recorder != nil {
				l.cfg.Recorder.Eventf(a, nil, corev1.EventTypeWarning, "StatusRestored", "Restore",
					"the status is the points ledger's own summary: it writes its books' figures back (credited %d, spent %d); "+
						"to change the balance, create a PointTopUp (a negative amount with a note to debit)",
					b.account.Status.Credited, b.account.Status.Spent)
			}
		}
		status := b.account.Status
		b.account = a.DeepCopy()
		b.account.Status = status
		b.dirty = true
		l.schedule(b)
	}
	b.mu.Unlock()
	l.requeueAccount(a.Namespace)
}

// rebuild builds a namespace's books again, retrying until it works or ctx ends.
func (l *Ledger) rebuild(ctx context.Context, namespace string) {
	for ctx.Err() == nil {
		err := l.build(ctx, namespace)
		if err == nil {
			l.requeueAccount(namespace)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errLostElection) {
			b := l.book(namespace)
			b.mu.Lock()
			l.stepDown(b, "the manager holding the leader Lease")
			b.mu.Unlock()
			return
		}
		l.cfg.Logger.Error(err, "building the books of an account", "namespace", namespace)
		if sleep(ctx, l.cfg.Clock, time.Second) != nil {
			return
		}
	}
}

func (l *Ledger) requeueTask(namespace, name string) {
	send(l.tasks, &videogenv1alpha1.VideoTask{}, namespace, name)
}

func (l *Ledger) requeueTopUp(namespace, name string) {
	send(l.topUps, &videogenv1alpha1.PointTopUp{}, namespace, name)
}

func (l *Ledger) requeueAccount(namespace string) {
	send(l.accounts, &videogenv1alpha1.PointAccount{}, namespace, videogenv1alpha1.PointAccountName)
}

// send queues a requeue without blocking the ledger: when the channel is full the controllers'
// own periodic requeues pick the object up.
func send(ch chan event.GenericEvent, obj client.Object, namespace, name string) {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	select {
	case ch <- event.GenericEvent{Object: obj}:
	default:
	}
}

func sleep(ctx context.Context, c clock.WithTicker, d time.Duration) error {
	_, err := sleepOrWake(ctx, c, d, nil)
	return err
}

// sleepOrWake is sleep that also ends, reporting it, when wake delivers.
func sleepOrWake(ctx context.Context, c clock.WithTicker, d time.Duration, wake <-chan struct{}) (bool, error) {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C():
		return false, nil
	case <-wake:
		return true, nil
	}
}

// stepDown stops this ledger deciding for anything once another manager fenced one of its
// accounts: it is no longer the authority, so Start returns ErrFenced and the manager exits, as
// when it loses its Lease. Call it with b.mu held.
func (l *Ledger) stepDown(b *book, authority string) {
	b.fenced = true
	l.ready.Store(false)
	l.deposedOnce.Do(func() {
		l.deposedBy = fmt.Errorf("%w: %q now keeps the books of account %q", ErrFenced, authority, b.namespace)
		close(l.deposed)
	})
	l.cfg.Logger.Error(ErrFenced, "stopping: another manager keeps this account's books", "namespace", b.namespace, "authority", authority)
}
