package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Standing is where a task stands in the books, as the VideoTask controller needs to know it.
type Standing int

const (
	// Unknown: the books have not seen this task yet (the ledger's events run behind the
	// controller's, or the copy is of a task that replaced the one the books know): ask again
	// shortly.
	Unknown Standing = iota
	// Unadmitted: it holds nothing yet; the controller prices it and calls Admit.
	Unadmitted
	// Held: it holds its price; the controller runs it, and calls Charge when it succeeds.
	Held
	// Charging: its charge waits for the account's next write; the ledger requeues it after.
	Charging
	// Charged: its charge is in the account; the controller ends it Succeeded, Deducted.
	Charged
	// Settled: nothing is held for it any more.
	Settled
	// Overdrawn: it shows an admission the balance cannot cover; the controller refuses it.
	Overdrawn
)

// View is what the books say of a copy of a task.
type View struct {
	Standing Standing
	// Stale: the copy is older than what the books know; wait for the cache to catch up.
	Stale bool
	// Price the task holds (or held, or is charged).
	Price int64
	// Result recorded with a Charged task's charge: the task ends with it.
	Result *videogenv1alpha1.TaskResult
	// Account is the UID of the PointAccount whose books answered: the account a held task's
	// points are frozen in, and the one Admit is to count an unadmitted task against.
	Account types.UID
}

// View returns what the books say of t. ErrNotReady: ask again later; ErrAccountNotFound: the
// namespace has no account.
func (l *Ledger) View(t *videogenv1alpha1.VideoTask) (View, error) {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return View{}, err
	}
	defer b.mu.Unlock()
	if b.account == nil {
		return View{}, ErrAccountNotFound
	}
	account := b.account.UID // view may let go of the lock (Overdrawn), and then answers ErrNotReady if the books moved
	v, err := l.view(b, t)
	v.Account = account
	return v, err
}

// view is View's answer from b's books. Call it with b.mu held and b.account set.
func (l *Ledger) view(b *book, t *videogenv1alpha1.VideoTask) (View, error) {
	e := b.tasks[t.Name]
	if e == nil || e.uid != t.UID {
		// Only the ledger's own events and its creates' answers add tasks to the books, in the
		// order the kube-apiserver made them: a copy the controller holds cannot bring back a
		// task that ended, nor stand for a create whose answer has not come (it may yet fail,
		// its hold dropped, while the task the controller sees runs uncounted).
		if e != nil && newer(e.rv, t.ResourceVersion) {
			return View{Stale: true}, nil // a newer task of this name replaced this copy's
		}
		if e != nil && e.uid == "" {
			e.asked = true
		}
		return View{Standing: Unknown}, nil
	}
	if e.rv != "" && newer(e.rv, t.ResourceVersion) {
		return View{Stale: true}, nil
	}
	if newer(t.ResourceVersion, e.rv) && unseen(e, l.evidence(t)) {
		// The ledger's own event for this copy has not come yet (the controller's listener ran
		// first), and it changes what the books say: wait for it. Answered from the entry,
		// the controller would accept a task that ended, or admit one again at today's price,
		// and Admit would move the entry past the very copy its event brings.
		return View{Standing: Unknown}, nil
	}
	v := View{Price: e.price}
	switch e.state {
	case unadmitted:
		v.Standing = Unadmitted
	case pending, held:
		v.Standing = Held
	case charging:
		v.Standing = Charging
	case charged:
		v.Standing = Charged
		if j, ok := b.journalEntry(e.uid); ok {
			v.Result = j.Result
		}
	case overdrawn:
		// The one verdict that undoes another manager's decision (the controller refuses the
		// task for good): only while this manager still keeps the books. A deposed one that
		// has not met its successor's fence yet counts the successor's admissions against a
		// balance that misses the successor's credits.
		if !l.keepsBooks(b) || b.tasks[t.Name] != e || e.uid != t.UID || e.state != overdrawn {
			return View{}, ErrNotReady // or the books moved while the account was read: ask again
		}
		v.Standing = Overdrawn
	default:
		v.Standing = Settled
	}
	return v, nil
}

// unseen reports whether a copy newer than the books' entry e says what e does not count: the
// task ended (e still holds, or waits for its charge), or it shows an admission e has not
// counted (e is not admitted yet, or its own admission is on its way). This process observes
// its own writes as they land, so such a copy was written by somebody else: a deposed manager's
// late reject, refund or accept, landed after this manager listed the task.
func unseen(e *entry, ev evidence) bool {
	switch {
	case ev.ended:
		return e.state != settled
	case ev.admitted:
		return e.state == unadmitted || e.state == pending
	}
	return false
}

// keepsBooks reads the account from the kube-apiserver: whether this manager is still its
// authority, or, with a Lease, holds the Lease in the term of its books (a foreign fence is
// then a deposed manager's, landed late, which the next write puts right). A manager that
// finds it no longer keeps the books steps down, as its writer would. Call it with b.mu held:
// it lets go of the lock while it reads (a slow kube-apiserver must not stall the account's
// creates, balance reads and writer) and holds it again when it returns, so the caller decides
// again from the books as they are then.
func (l *Ledger) keepsBooks(b *book) bool {
	var term error
	fresh, ok, _ := l.readAccountUnlocked(b, func(ctx context.Context, fresh *videogenv1alpha1.PointAccount) {
		if fresh.Status.Authority != l.cfg.Identity && l.cfg.Lease != nil {
			term = l.inTerm(ctx)
		}
	})
	switch {
	case !ok:
		return false // ask again (a replaced account's event rebuilds the books)
	case fresh.Status.Authority == l.cfg.Identity:
		return true
	case l.cfg.Lease != nil && term == nil:
		return true
	case l.cfg.Lease != nil && !errors.Is(term, errLostElection):
		return false
	}
	l.stepDown(b, fresh.Status.Authority)
	return false
}

// readAccountUnlocked reads b's account from the kube-apiserver with b.mu let go (a slow
// kube-apiserver must not stall the account's creates, balance reads and writer), runs also
// (if not nil) on the copy read, still unlocked, and takes the lock again. Call it with b.mu
// held. ok is false if the read failed or found another account, or if the books were rebuilt,
// replaced or fenced meanwhile: the caller then asks again, and otherwise decides again from
// the books as they are now. failed is the read's error, if it failed (not found is no failure).
func (l *Ledger) readAccountUnlocked(b *book, also func(context.Context, *videogenv1alpha1.PointAccount)) (fresh *videogenv1alpha1.PointAccount, ok bool, failed error) {
	ctx := l.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	key, uid := client.ObjectKeyFromObject(b.account), b.account.UID
	b.mu.Unlock()
	fresh = &videogenv1alpha1.PointAccount{}
	err := l.cfg.Reader.Get(ctx, key, fresh)
	if err != nil && !apierrors.IsNotFound(err) {
		failed = err
	}
	read := err == nil && fresh.UID == uid
	if read && also != nil {
		also(ctx, fresh)
	}
	b.mu.Lock()
	return fresh, read && !b.fenced && !b.building && b.account != nil && b.account.UID == uid, failed
}

// Admit counts the hold of a task made with kubectl at price, before the controller's status
// write records it (charge Frozen). If that write certainly fails, call Unadmit; if it lands,
// Observe. A task already counted is admitted again without counting twice. account is the
// PointAccount the caller's View named, which the status write records as the task's: if the
// books are another account's by now (closed and created again since), ErrNotReady.
func (l *Ledger) Admit(t *videogenv1alpha1.VideoTask, price int64, account types.UID) error {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := l.acceptingNow(b); err != nil {
		return err
	}
	if b.account.UID != account {
		return ErrNotReady // the View was of another account's books: ask again
	}
	e := b.tasks[t.Name]
	if e == nil || e.uid != t.UID {
		return ErrNotReady // not in the books yet: the ledger's event for it comes
	}
	switch e.state {
	case pending, held, charging, charged:
		return nil
	case settled, overdrawn:
		return ErrSettled
	}
	if b.available() < price {
		if !l.keepsBooks(b) {
			return ErrNotReady // a refusal is final: not from a deposed manager's balance
		}
		// Decided again from the books as they are after the read, and not while a credit may
		// be in the account already with the books not knowing it yet (a write whose answer
		// has not come, or that answered an error after it landed): kubectl get pointaccount
		// would show the points the refusal says are missing.
		if b.tasks[t.Name] != e || e.uid != t.UID || e.state != unadmitted || b.accepting() != nil || b.account.UID != account ||
			b.creditOnItsWay() {
			return ErrNotReady
		}
		if avail := b.available(); avail < price {
			return &InsufficientBalanceError{Required: price, Available: max(avail, 0)}
		}
	}
	if newer(t.ResourceVersion, e.rv) {
		e.rv = t.ResourceVersion
	}
	e.base, e.price = t.ResourceVersion, price
	b.set(e, pending)
	l.schedule(b)
	return nil
}

// stillSuspended reads the account from the kube-apiserver before a kubectl task is refused for
// good for its suspension: the books' copy of the spec comes with the account's events, which
// may lag the task's (another watch). Call it with b.mu held; like keepsBooks it lets go of the
// lock for the read, and reports whether both the read and the books still say suspended.
// A read that failed is errClusterFailed: it says nothing changed (not ready, reason busy).
func (l *Ledger) stillSuspended(b *book) (bool, error) {
	fresh, ok, failed := l.readAccountUnlocked(b, nil)
	return ok && fresh.Spec.Suspended && b.account.Spec.Suspended, failed
}

// stillClosing reads the account from the kube-apiserver before a kubectl task is refused for
// good for its deletion: the books' copy comes with the account's events, which may lag the
// task's, and the account may be gone and created again (same name, another UID, open) since.
// Call it with b.mu held; like stillSuspended it lets go of the lock for the read, and reports
// whether both the read (the same account) and the books still say it is being deleted.
func (l *Ledger) stillClosing(b *book) (bool, error) {
	fresh, ok, failed := l.readAccountUnlocked(b, nil)
	return ok && !fresh.DeletionTimestamp.IsZero() && !b.account.DeletionTimestamp.IsZero(), failed
}

// acceptingNow is accepting, with a suspension or a deletion confirmed by the kube-apiserver
// before it refuses (a 403, or a kubectl task's refusal for good): the books' copy of the
// account comes with its events, which may lag. Unconfirmed, it is ErrNotReady, retried while
// the events come. Call it with b.mu held (the reads let go of it).
func (l *Ledger) acceptingNow(b *book) error {
	err := b.accepting()
	still, failed := true, error(nil)
	switch {
	case errors.Is(err, ErrAccountSuspended):
		still, failed = l.stillSuspended(b)
	case errors.Is(err, ErrAccountClosing):
		still, failed = l.stillClosing(b)
	}
	switch {
	case still:
		return err
	case failed != nil:
		// The read failed: nothing is known to have changed (a suspended customer must not
		// be told its suspension was lifted), the cluster did not answer.
		return fmt.Errorf("%w: %w", errClusterFailed, failed)
	}
	return errAccountLags // lifted, or gone or created again, since the books' copy
}

// accepting says why the account takes no new tasks (nil if it does). Call it with b.mu held.
func (b *book) accepting() error {
	switch {
	case b.account == nil:
		return fmt.Errorf("%w: namespace %q has no PointAccount %q", ErrAccountNotFound, b.namespace, videogenv1alpha1.PointAccountName)
	case !b.account.DeletionTimestamp.IsZero():
		return ErrAccountClosing
	case b.account.Spec.Suspended:
		return ErrAccountSuspended
	}
	return nil
}

// Unadmit takes back an Admit whose status write certainly did not land (a conflict).
func (l *Ledger) Unadmit(t *videogenv1alpha1.VideoTask) {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return
	}
	defer b.mu.Unlock()
	if e := b.tasks[t.Name]; e != nil && e.uid == t.UID && e.state == pending {
		b.set(e, unadmitted)
		l.schedule(b)
	}
}

// Observe brings a copy of a task this process just wrote into the books (its events do the
// same later; the older copy is then ignored).
func (l *Ledger) Observe(t *videogenv1alpha1.VideoTask) {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return
	}
	defer b.mu.Unlock()
	// An entry without a UID waits for its REST create: the controller's copy may be of an
	// earlier task of the name, delivered after its deletion dropped it; the informer's events
	// (in the kube-apiserver's order) or the create's answer fill the UID.
	if e := b.tasks[t.Name]; e == nil || e.uid == "" || e.uid != t.UID {
		// It left the books (closed, or deleted): nothing to bring back. But if it left
		// before its final status was seen (the informer's copy of a task closing is the
		// one before), this copy is that status: a settled charge never changes, so it
		// decides the journal entry without a read.
		if f := fateOfSource(t); f != fateUnknown && b.fates[t.UID] == fateCheck {
			b.fates[t.UID] = f
			l.schedule(b)
		}
		return
	}
	if e := b.observe(t, l.evidence(t)); e != nil && e.state == overdrawn {
		l.requeueTask(t.Namespace, t.Name)
	}
	l.schedule(b)
}

// Charge records that a held task succeeded with result: its price is added to spent, with a
// journal entry, in the account's next write. It reports whether that write has landed (the
// controller then ends the task Succeeded, Deducted); until then the ledger requeues the task
// when it lands.
func (l *Ledger) Charge(t *videogenv1alpha1.VideoTask, result *videogenv1alpha1.TaskResult) (bool, error) {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	e := b.tasks[t.Name]
	if e == nil || e.uid != t.UID {
		return false, fmt.Errorf("charging task %s/%s: %w", t.Namespace, t.Name, ErrSettled)
	}
	switch e.state {
	case charged:
		return true, nil
	case charging:
		return false, nil
	case pending, held:
		b.set(e, charging)
		b.enqueue(videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalCharge, Name: t.Name, UID: t.UID,
			Amount: e.price, Result: result.DeepCopy()})
		l.schedule(b)
		return false, nil
	default:
		return false, fmt.Errorf("charging task %s/%s (%s): %w", t.Namespace, t.Name, e.state, ErrSettled)
	}
}

// CreateTask admits task at price and creates it, carrying the signed admission: the create is
// the freeze. Nothing is created when the account cannot pay (InsufficientBalanceError), is
// missing, suspended or closing, or a task of that name is open (ErrTaskExists).
func (l *Ledger) CreateTask(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	if price < 0 {
		return nil, fmt.Errorf("price %d is negative", price)
	}
	task = task.DeepCopy()
	l.cfg.Signer.Sign(task, price) // outside the account's lock: it marshals the spec
	b, err := l.lockBook(task.Namespace)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// The caller left while this waited for the account (behind a rebuild): nothing is
		// sent for it. (Once sent, the create is not cut: see below.)
		b.mu.Unlock()
		return nil, err
	}
	if _, ok := b.tasks[task.Name]; ok {
		// First: a REST task's name is its Idempotency-Key's, so this is a retry of a request
		// whose task exists or is being created, answered as its replay (409) whatever the
		// account's standing or balance since; a 403 or 402 would tell the client a request
		// was refused whose task runs and is charged.
		b.mu.Unlock()
		return nil, ErrTaskExists
	}
	if err := l.acceptingNow(b); err != nil {
		b.mu.Unlock()
		if errors.Is(err, ErrAccountNotFound) {
			if lag := l.noAccount(ctx, task.Namespace); lag != nil {
				err = lag // created since, its Add not here yet (the kubectl path: noAccount)
			}
		}
		return nil, err
	}
	if avail := b.available(); avail < price {
		b.mu.Unlock()
		return nil, &InsufficientBalanceError{Required: price, Available: max(avail, 0)}
	}
	e := &entry{price: price, admission: task.Annotations[videogenv1alpha1.AnnotationAdmission]}
	b.tasks[task.Name] = e
	b.set(e, pending)
	l.schedule(b)
	b.mu.Unlock()

	// Not cut by the caller leaving (a replica that hung up, or its attempt timed out): the
	// request is sent, the kube-apiserver may store the task all the same, and a re-read made
	// at once would not see it yet and end a hold that then lands. Its answer says what the
	// books hold; createTimeout bounds a kube-apiserver that never gives one.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	err = l.cfg.Client.Create(cctx, task)
	cancel()
	var other *videogenv1alpha1.VideoTask
	inDoubt := false // the create may have landed, and no read has said whether it did
	// taken: the read found another task with the name (or a closed one): whatever the create's
	// error said, it cannot land, and the caller is told a task of the name exists (a 409 the
	// REST apiserver answers as a replay), as for AlreadyExists.
	taken := false
	if err != nil {
		// Failed, or in doubt. Whatever has the name now (this create, landed after all;
		// another task, whose events observe left out while this create held the entry) is
		// read, to say whether the create landed, or else to count it when the entry goes. A
		// closed one holds nothing, and the open tasks' cache never brings it back: counted,
		// its entry would stay after it is gone.
		key := client.ObjectKeyFromObject(task)
		fresh, found := l.readTask(context.WithoutCancel(ctx), key)
		switch {
		case !found && !apierrors.IsAlreadyExists(err) && !requestRefused(err):
			// It may have landed: its hold stays until the kube-apiserver answers (rule 2:
			// un-counted only when the create certainly failed).
			inDoubt = true
		case fresh == nil && mayStillLand(err):
			// Timed out, not refused: the write may be stored after this read (the Status
			// reason Timeout says the operation may still complete). In doubt, as above.
			inDoubt = true
		case !found:
			go l.countLater(key) // the kube-apiserver keeps failing: count it when it answers
		case fresh == nil || fresh.Status.Closed:
			taken = fresh != nil
		case !apierrors.IsAlreadyExists(err) && !requestRefused(err) && l.isThisCreate(fresh, task, price):
			task, err = fresh, nil // it landed
		default:
			// Another task, or this create landed after all though its error said it was
			// refused: counted as any admission the books did not make (rule 2).
			other, taken = fresh, true
		}
	}

	var counted types.UID // another task of the name, counted from a read outside the lock
	defer func() {
		if counted != "" {
			l.confirm(context.WithoutCancel(ctx), client.ObjectKeyFromObject(task), counted, false)
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tasks[task.Name] != e {
		// The books were rebuilt meanwhile; they count what exists.
		switch {
		case err == nil:
			return task, nil
		case inDoubt:
			return nil, fmt.Errorf("creating task: %w: %w", errCreateInDoubt, err)
		case apierrors.IsAlreadyExists(err), taken:
			return nil, ErrTaskExists
		}
		return nil, fmt.Errorf("creating task: %w", err)
	}
	if err != nil {
		if inDoubt {
			if e.uid == "" {
				// Neither its answer nor its event named a task: its own event, or a read
				// once the kube-apiserver answers (settleDoubt), settles it.
				go l.settleDoubt(client.ObjectKeyFromObject(task), e)
			}
			// Named by its own event (observe names the entry only with a copy carrying this
			// create's admission), the create landed and holds; either way the caller is told
			// it may have, not that it failed: a caller told it failed submits it again.
			return nil, fmt.Errorf("creating task: %w: %w", errCreateInDoubt, err)
		}
		if e.state == pending {
			b.set(e, unadmitted)
		}
		if e.uid == "" {
			delete(b.tasks, task.Name)
			if other != nil {
				if o := b.observe(other, l.evidence(other)); o != nil && o.uid == other.UID {
					counted = other.UID
					l.requeueTask(other.Namespace, other.Name) // its controller may wait for the books
				}
			}
		}
		l.schedule(b)
		if apierrors.IsAlreadyExists(err) || taken {
			return nil, ErrTaskExists
		}
		return nil, fmt.Errorf("creating task: %w", err)
	}
	if e.uid == "" || e.uid == task.UID {
		if e.rv == "" || newer(task.ResourceVersion, e.rv) {
			e.uid, e.rv = task.UID, task.ResourceVersion
		}
		if e.state == pending {
			b.set(e, held)
		}
		if e.asked {
			e.asked = false
			l.requeueTask(task.Namespace, task.Name)
		}
		if e.uid == task.UID {
			l.awaitEvent(e)
		}
	}
	return task, nil
}

// uneventedCheck is how long a task counted from a create's answer or a read may go unnamed by
// any informer event before sweepUnevented reads it again, and how often it looks.
const uneventedCheck = 30 * time.Second

// awaitEvent marks e, counted from a create's answer or a read, as waiting for an informer event
// to name its task (sweepUnevented reads it again meanwhile). Call it with b.mu held.
func (l *Ledger) awaitEvent(e *entry) {
	if !e.evented && e.unnamedSince.IsZero() {
		e.unnamedSince = l.cfg.Clock.Now()
	}
}

// sweepUnevented reads again, every uneventedCheck, each task counted from its create's answer
// or a read that no informer event has named for that long: a reflector that relists after its
// watch fell out of the kube-apiserver's window (410) reports no Add and no Delete of a task
// created and deleted in between, and its hold would stay until the next failover. Once an
// event names the task, its deletion comes as one too; a read that finds it gone or closed ends
// the hold (confirm).
func (l *Ledger) sweepUnevented(ctx context.Context) {
	type unnamed struct {
		key client.ObjectKey
		uid types.UID
	}
	for sleep(ctx, l.cfg.Clock, uneventedCheck) == nil {
		cutoff := l.cfg.Clock.Now().Add(-uneventedCheck)
		l.mu.Lock()
		books := slices.Collect(maps.Values(l.books))
		l.mu.Unlock()
		var due []unnamed
		for _, b := range books {
			b.mu.Lock()
			for name, e := range b.tasks {
				if !e.evented && !e.unnamedSince.IsZero() && !e.unnamedSince.After(cutoff) {
					due = append(due, unnamed{client.ObjectKey{Namespace: b.namespace, Name: name}, e.uid})
				}
			}
			b.mu.Unlock()
		}
		for _, u := range due {
			l.confirm(ctx, u.key, u.uid, true)
		}
	}
}

// createTimeout bounds a REST create's kube create, which its caller's leaving does not end:
// longer than the kube-apiserver's own request timeout (60 s), which answers first.
const createTimeout = 70 * time.Second

// isThisCreate reports whether fresh is the task a create of task at price made: it carries that
// create's signed admission.
func (l *Ledger) isThisCreate(fresh, task *videogenv1alpha1.VideoTask, price int64) bool {
	p, ok := l.cfg.Signer.Admitted(fresh)
	return ok && p == price && fresh.Annotations[videogenv1alpha1.AnnotationAdmission] == task.Annotations[videogenv1alpha1.AnnotationAdmission]
}

// readTask reads a task, retrying while the kube-apiserver fails: nil if there is none; found
// false if it never answered.
func (l *Ledger) readTask(ctx context.Context, key client.ObjectKey) (t *videogenv1alpha1.VideoTask, found bool) {
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 6, Cap: time.Second}
	err := retry.OnError(backoff, func(err error) bool { return !apierrors.IsNotFound(err) }, func() error {
		fresh := &videogenv1alpha1.VideoTask{}
		if err := l.cfg.Reader.Get(ctx, key, fresh); err != nil {
			return err
		}
		t = fresh
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, true
	}
	return t, err == nil
}

// countLater counts the task a failed create found in its name's way once the kube-apiserver
// answers: none of its events may come again before it is admitted, so the books would not
// know it, and its controller would wait for them.
func (l *Ledger) countLater(key client.ObjectKey) {
	if sleep(l.ctx, l.cfg.Clock, time.Second) != nil {
		return
	}
	t, ok := l.readUntilAnswered(l.ctx, key)
	if !ok || t == nil || t.Status.Closed {
		return
	}
	b := l.book(key.Namespace)
	b.mu.Lock()
	var counted bool
	if b.built && b.account != nil && b.tasks[key.Name] == nil {
		if e := b.observe(t, l.evidence(t)); e != nil && e.uid == t.UID {
			counted = true
			l.requeueTask(key.Namespace, key.Name)
		}
	}
	b.mu.Unlock()
	if counted {
		l.confirm(l.ctx, key, t.UID, true)
	}
}

// settleDoubt settles the entry e of a REST create left in doubt (it failed, and its re-read
// was not answered): its hold stays until a read answers. If the name's task is the create's
// (its signed admission), the create landed: it is counted from the read (its event may have
// come and gone: confirmed); otherwise it did not, the hold ends, and whatever task has the
// name is counted as countLater does.
func (l *Ledger) settleDoubt(key client.ObjectKey, e *entry) {
	if sleep(l.ctx, l.cfg.Clock, time.Second) != nil {
		return
	}
	t, ok := l.readUntilAnswered(l.ctx, key)
	if !ok {
		return
	}
	b := l.book(key.Namespace)
	b.mu.Lock()
	if b.tasks[key.Name] != e || e.uid != "" {
		b.mu.Unlock()
		return // the books were rebuilt, or the create's own event named its task
	}
	open := t != nil && !t.Status.Closed
	if !open || !e.createsTask(t) {
		// Not this create's task (or none open): the create did not land, and its hold ends.
		if e.state == pending {
			b.set(e, unadmitted)
		}
		delete(b.tasks, key.Name)
	}
	if open {
		b.observe(t, l.evidence(t))
	}
	var counted types.UID
	if o := b.tasks[key.Name]; o != nil && t != nil && o.uid == t.UID {
		counted = t.UID
		o.asked = false
		l.requeueTask(key.Namespace, key.Name)
	}
	l.schedule(b)
	b.mu.Unlock()
	if counted != "" {
		l.confirm(l.ctx, key, counted, true)
	}
}

// readUntilAnswered is readTask, again once a second until the kube-apiserver answers; ok false
// if ctx ends first.
func (l *Ledger) readUntilAnswered(ctx context.Context, key client.ObjectKey) (*videogenv1alpha1.VideoTask, bool) {
	for {
		if t, found := l.readTask(ctx, key); found {
			return t, true
		}
		if sleep(ctx, l.cfg.Clock, time.Second) != nil {
			return nil, false
		}
	}
}

// confirm reads again a task the books counted (uid) from a read made outside the account's
// lock, and drops it if it is gone or closed since: its deletion's or close's event may have
// come between that read and the count, and found nothing to drop. What happens after this
// read comes as an event. If the kube-apiserver does not answer, it reads again once a second
// (wait: here; else in a goroutine).
func (l *Ledger) confirm(ctx context.Context, key client.ObjectKey, uid types.UID, wait bool) {
	t, found := l.readTask(ctx, key)
	if !found {
		if !wait {
			go l.confirm(ctx, key, uid, true)
			return
		}
		if t, found = l.readUntilAnswered(ctx, key); !found {
			return
		}
	}
	b := l.book(key.Namespace)
	b.mu.Lock()
	e := b.tasks[key.Name]
	var next types.UID
	switch {
	case e == nil || e.uid != uid:
	case t == nil || t.Status.Closed:
		b.drop(key.Name)
	case t.UID != uid:
		// Replaced: the task there now may have had its events left out too (while a create
		// held the name). It is counted from this read, and confirmed in turn.
		b.drop(key.Name)
		if n := b.observe(t, l.evidence(t)); n != nil && n.uid == t.UID {
			next = t.UID
			l.requeueTask(key.Namespace, key.Name)
		}
	default:
		// Counted from a read: if no event has named it, its deletion may bring none either.
		if n := b.observe(t, l.evidence(t)); n != nil && n.uid == uid {
			l.awaitEvent(n)
		}
	}
	l.schedule(b)
	b.mu.Unlock()
	if next != "" {
		l.confirm(ctx, key, next, wait)
	}
}

// mayStillLand reports whether a create failed in a way that does not end it: the
// kube-apiserver (504 Timeout, or 500 ServerTimeout) or the client gave up waiting, or the
// kube-apiserver failed inside (a 500 such as etcd's "request timed out", a 503 while etcd
// changes leader), and etcd may store the write after a re-read found nothing; or the
// connection broke after the request went out (a reset, an EOF, an HTTP/2 connection lost: no
// answer at all), as opposed to a dial that failed, which sent nothing. A 429 is not among them:
// API Priority and Fairness sheds a request before it is handled.
func mayStillLand(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || sentAndCut(err)
}

// sentAndCut reports whether a request failed in transport (client-go's *url.Error) other than by
// a dial or a name lookup that failed: it may have reached the kube-apiserver.
func sentAndCut(err error) bool {
	var transport *url.Error
	return errors.As(err, &transport) && !neverSent(err)
}

// neverSent reports whether a transport error came before the request could leave: a dial or
// a name lookup that failed. Any other (a reset, an EOF, a lost HTTP/2 connection) may have
// reached the other side. The ledger's own client draws the same line (mayHaveLanded).
func neverSent(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)
}

// requestRefused reports whether the kube-apiserver refused a request itself: nothing was
// stored, and the same request would be refused again (no retry helps).
func requestRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsUnsupportedMediaType(err)
}

// Figures are an account's points as the books have them now.
type Figures struct {
	Balance  int64 `json:"balance"`
	Frozen   int64 `json:"frozen"`
	Spent    int64 `json:"spent"`
	Credited int64 `json:"credited"`
	Holds    int   `json:"holds"`
}

// Balance returns the account's figures: every task admitted so far counted, whichever REST
// apiserver replica admitted it.
func (l *Ledger) Balance(ctx context.Context, namespace string) (Figures, error) {
	b, err := l.lockBook(namespace)
	if err != nil {
		return Figures{}, err
	}
	if b.account == nil {
		b.mu.Unlock()
		if lag := l.noAccount(ctx, namespace); lag != nil {
			return Figures{}, lag // created since, its Add not here yet
		}
		return Figures{}, fmt.Errorf("%w: namespace %q", ErrAccountNotFound, namespace)
	}
	defer b.mu.Unlock()
	st := b.account.Status
	return Figures{Balance: b.available(), Frozen: b.frozen, Spent: st.Spent, Credited: st.Credited - b.debits, Holds: b.holds}, nil
}

// noAccount reads around the informer whether namespace has no PointAccount, before a REST
// call is told so (403 or 404 account_not_found, which no client retries): the books have one
// only once its Add event comes, which may lag its creation. nil: there is none; otherwise
// why not ready: errAccountLags (there is one), or errClusterFailed (the read failed: it says
// nothing).
func (l *Ledger) noAccount(ctx context.Context, namespace string) error {
	err := l.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", errClusterFailed, err)
	}
	return errAccountLags
}

// TopUpOutcome is where a PointTopUp stands.
type TopUpOutcome struct {
	// Applied: the journal has it; the controller records BalanceAfter and AccountUID.
	Applied      bool
	BalanceAfter int64
	// AccountUID is the account it was applied to, or that refused it (empty for a refusal
	// the top-up's status already shows).
	AccountUID string
	// Queued: it waits for the account's next write; the ledger requeues it after.
	Queued bool
	// AlreadyApplied: its status says so on the kube-apiserver; the copy asked about is older.
	AlreadyApplied bool
	// Refused, for good, with Reason (a PointTopUp condition reason) and Message.
	Refused bool
	Reason  string
	Message string
	// Gone: the kube-apiserver no longer has the top-up, or it is being deleted and the books
	// hold nothing of it; nothing was or will be applied (its finalizer may go).
	Gone bool
	// NeedsFinalizer: nothing was queued; the top-up must carry FinalizerLedger first, so that
	// it cannot vanish while its credit is queued (the entry does not carry its reference).
	NeedsFinalizer bool
}

// ApplyTopUp credits (or debits) a PointTopUp once: queued for the account's next write, with a
// journal entry. A top-up whose reference another top-up applied to an account of the namespace
// has (this account or an earlier one) is refused, and so is a debit larger than the available
// balance. ErrAccountNotFound: it waits for the account; ErrAccountClosing: a credit waits for
// the account created after a closing one (read from the kube-apiserver, not only the books).
// It reads the top-up first: Gone if it no longer exists. A new entry is queued only for a
// top-up that carries FinalizerLedger and is not being deleted (NeedsFinalizer, Gone
// otherwise): one that cannot vanish before its status shows the credit, so the top-up lists
// hold every reference the books used.
func (l *Ledger) ApplyTopUp(t *videogenv1alpha1.PointTopUp) (TopUpOutcome, error) {
	if !l.ready.Load() {
		return TopUpOutcome{}, ErrNotReady
	}
	// Decided from the kube-apiserver's copy, not the one asked about: a cache's may be older
	// than the top-up's refusal, or of one deleted since (a refused one may be), and the books
	// forget a refusal's entry once its status shows it.
	fresh := &videogenv1alpha1.PointTopUp{}
	ctx := l.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := l.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(t), fresh); apierrors.IsNotFound(err) || (err == nil && fresh.UID != t.UID) {
		return TopUpOutcome{Gone: true}, nil
	} else if err != nil {
		return TopUpOutcome{}, fmt.Errorf("reading the top-up: %w", err)
	}
	t = fresh
	if t.Status.AppliedAt != nil {
		return TopUpOutcome{AlreadyApplied: true}, nil
	}
	// A credit's account is read too: the books' copy comes with the account's events, which
	// may lag its deletion for as long as the informer does; queued meanwhile, the credit
	// would be written to the closing account.
	var earlierCredits []videogenv1alpha1.PointTopUp
	if t.Spec.Amount < 0 {
		// Read now, without the lock, for a debit the balance may not cover: see creditsBefore.
		list := &videogenv1alpha1.PointTopUpList{}
		if err := l.cfg.Reader.List(ctx, list, client.InNamespace(t.Namespace)); err != nil {
			return TopUpOutcome{}, fmt.Errorf("%w: listing the top-ups before a debit: %w", errClusterFailed, err)
		}
		earlierCredits = list.Items
	}
	var acct *videogenv1alpha1.PointAccount
	if t.Spec.Amount > 0 {
		acct = &videogenv1alpha1.PointAccount{}
		if err := l.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: videogenv1alpha1.PointAccountName}, acct); apierrors.IsNotFound(err) {
			acct = nil
		} else if err != nil {
			return TopUpOutcome{}, fmt.Errorf("reading the account: %w", err)
		}
	}
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return TopUpOutcome{}, err
	}
	defer b.mu.Unlock()
	// A refusal in the status is believed only when the books hold no credit of it: only the
	// ledger refuses, but a status can be edited by hand (to be allowed to delete a top-up that
	// looks stuck), and a credit already written must keep its reference and be shown applied.
	statusRefusal := func() TopUpOutcome {
		c := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied)
		return TopUpOutcome{Refused: true, Reason: c.Reason, Message: c.Message}
	}
	if b.account == nil {
		if t.RefusedForGood() {
			return statusRefusal(), nil
		}
		return TopUpOutcome{}, ErrAccountNotFound
	}
	if msg, ok := b.refusals[t.UID]; ok {
		if _, queued := b.queued[t.UID]; queued {
			return TopUpOutcome{Queued: true}, nil // the refusal waits for the account's write
		}
		return TopUpOutcome{Refused: true, Reason: videogenv1alpha1.ReasonDebitExceedsBalance, Message: msg, AccountUID: string(b.account.UID)}, nil
	}
	if j, ok := b.journalEntry(t.UID); ok {
		out := TopUpOutcome{Applied: true, AccountUID: string(b.account.UID)}
		if j.BalanceAfter != nil {
			out.BalanceAfter = *j.BalanceAfter
		}
		return out, nil
	}
	if _, ok := b.queued[t.UID]; ok {
		return TopUpOutcome{Queued: true}, nil
	}
	if t.RefusedForGood() {
		return statusRefusal(), nil
	}
	if other, ok := b.references[referenceKey(t)]; ok && other.uid == t.UID {
		// Applied, and its journal entry already gone: this is a copy from before its status
		// said so (a cache that lags). Never credited again.
		return TopUpOutcome{AlreadyApplied: true}, nil
	}
	if other, ok := b.references[referenceKey(t)]; ok {
		if _, queued := b.queued[other.uid]; queued {
			// The other top-up is not applied until its entry is written (a crash before that
			// loses it): a refusal now would be for good, for a reference nobody used. This
			// one waits, and is requeued (and refused) once that entry is written.
			b.refWaiters[other.uid] = append(b.refWaiters[other.uid], t.Name)
			return TopUpOutcome{Queued: true}, nil
		}
		where := "already applied to this account by PointTopUp " + other.name
		if other.earlier {
			where = "applied by PointTopUp " + other.name + " to an earlier account of this namespace"
		}
		nothing := "nothing was credited"
		if t.Spec.Amount < 0 {
			nothing = "nothing was debited"
		}
		ref := fmt.Sprintf("reference %q", t.Spec.Reference)
		if other.reference != t.Spec.Reference {
			// A look-alike (another case, a fullwidth digit, another dash): name both, so the
			// administrator sees why two spellings are one reference.
			ref = fmt.Sprintf("reference %q (the same as %q)", t.Spec.Reference, other.reference)
		}
		return TopUpOutcome{Refused: true, Reason: videogenv1alpha1.ReasonDuplicateReference, AccountUID: string(b.account.UID),
			Message: fmt.Sprintf("Refused: %s was %s; %s", ref, where, nothing)}, nil
	}
	switch {
	case !t.DeletionTimestamp.IsZero():
		return TopUpOutcome{Gone: true}, nil // deleted before anything was queued: nothing will be
	case !controllerutil.ContainsFinalizer(t, videogenv1alpha1.FinalizerLedger):
		return TopUpOutcome{NeedsFinalizer: true}, nil
	}
	if t.Spec.Amount > 0 {
		// A credit to a closing account would only keep it from closing (nothing can spend
		// it: it takes no task) and use the reference on an account that is going: it waits,
		// and is applied to the account created after it. A debit is what closes it.
		switch {
		case acct == nil || acct.UID != b.account.UID:
			return TopUpOutcome{}, errAccountLags // gone or replaced since the books' copy: its events come
		case !b.account.DeletionTimestamp.IsZero() || !acct.DeletionTimestamp.IsZero():
			return TopUpOutcome{}, ErrAccountClosing
		}
	}
	if t.Spec.Amount < 0 {
		if avail := b.available(); avail < -t.Spec.Amount {
			if pending := b.creditsBefore(t, earlierCredits); pending != "" {
				// Top-ups count in the order they were made: a debit created with its credits
				// (one kubectl apply, a GitOps sync) is decided once they are, not refused for
				// good because its reconcile came first.
				return TopUpOutcome{}, fmt.Errorf("%w: the debit waits for PointTopUp %s, a credit made before it", errCreditsPending, pending)
			}
			// Recorded in the account before the top-up's status says so, as a credit is: a
			// copy of the top-up from before that status (a lagging cache, or a new manager's
			// list) is then never debited once the balance would cover it.
			b.refusals[t.UID] = fmt.Sprintf("Refused: the debit of %d points exceeds the %d points available; nothing was debited", -t.Spec.Amount, max(avail, 0))
			b.enqueue(videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalRefusal, Name: t.Name, UID: t.UID})
			l.schedule(b)
			return TopUpOutcome{Queued: true}, nil
		}
		b.debits -= t.Spec.Amount
	}
	b.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference}
	b.enqueue(videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalTopUp, Name: t.Name, UID: t.UID, Amount: t.Spec.Amount})
	l.schedule(b)
	return TopUpOutcome{Queued: true}, nil
}

// creditsBefore names a credit of list made no later than debit (creation times are to the
// second: one made in the same second counts as before) that is not in the account's credited
// yet: neither applied, nor refused for good, nor going, nor written to the journal; queued for
// the account's next write, or not decided yet (its reference not held: held by another
// top-up, it would be refused). Its credit may yet cover the debit. None while the account is closing: a credit then waits for
// the next account, and the debit is what closes this one. Call it with b.mu held.
func (b *book) creditsBefore(debit *videogenv1alpha1.PointTopUp, list []videogenv1alpha1.PointTopUp) string {
	if !b.account.DeletionTimestamp.IsZero() {
		return ""
	}
	for i := range list {
		c := &list[i]
		_, written := b.journalEntry(c.UID)
		_, queued := b.queued[c.UID] // to be credited at the account's next write
		// Not queued and its reference held: applied (its entry forgotten), or a duplicate.
		_, held := b.references[referenceKey(c)]
		if c.Spec.Amount > 0 && c.UID != debit.UID && !c.CreationTimestamp.After(debit.CreationTimestamp.Time) &&
			c.Status.AppliedAt == nil && !c.RefusedForGood() && c.DeletionTimestamp.IsZero() && !written && (queued || !held) {
			return c.Name
		}
	}
	return ""
}

// ObserveTopUp tells the books that a top-up's status shows it applied, or refused: its journal
// entry may go.
func (l *Ledger) ObserveTopUp(t *videogenv1alpha1.PointTopUp) {
	b, err := l.lockBook(t.Namespace)
	if err != nil {
		return
	}
	defer b.mu.Unlock()
	switch {
	case b.account == nil:
	case t.Status.AppliedAt != nil && t.Status.AccountUID == b.account.UID:
		b.topUpsShown[t.UID] = true
		b.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference}
		l.schedule(b)
	case t.Status.AppliedAt != nil:
		// Applied to an earlier account of the namespace, or so a status written by hand says:
		// its reference is used for good, as the books built from the list (install) have it,
		// so that no manager credits it again and another refuses it. A copy no newer than that
		// list says nothing it did not: it is a lagging cache's, maybe of a namespace of this
		// name deleted before this one was made, whose references are not this one's.
		if _, used := b.references[referenceKey(t)]; !used && newer(t.ResourceVersion, b.listRV) {
			b.references[referenceKey(t)] = appliedTopUp{uid: t.UID, name: t.Name, reference: t.Spec.Reference, earlier: true}
		}
	case t.RefusedForGood() && !b.holdsCredit(t.UID):
		b.topUpsShown[t.UID] = true // a refusal's journal entry may go
		l.schedule(b)
	}
	// A refusal written by hand over a credit the books hold is not shown: the entry stays,
	// and ApplyTopUp answers Applied, so the controller writes the credit over it.
}

// Closable reports whether a deleted account may go: nothing available, held, queued or in
// its journal, and its status written saying so. Otherwise the error says what keeps it.
func (l *Ledger) Closable(namespace string) error {
	b, err := l.lockBook(namespace)
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if b.account == nil {
		return ErrAccountNotFound
	}
	// Both the books and the status written say so: the status is what an auditor keeps.
	busy := func() error {
		st := b.account.Status
		if b.available() != 0 || b.holds != 0 || b.frozen != 0 || len(b.queued) != 0 ||
			st.Balance != 0 || st.Holds != 0 || st.Frozen != 0 || len(st.Journal) != 0 {
			return errors.New(closingMessage(namespace, &videogenv1alpha1.PointAccountStatus{
				Balance: b.available(), Holds: int32(b.holds), Frozen: b.frozen, Journal: st.Journal}))
		}
		return nil
	}
	if err := busy(); err != nil {
		return err
	}
	if !l.keepsBooks(b) {
		// A deposed manager's books miss what its successor wrote (a credit to the closing
		// account): the account goes only on the word of the manager that keeps its books.
		return ErrNotReady
	}
	return busy() // decided again from the books as they are after the read
}
