package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// An account is written by one goroutine at a time (book.flushing), once per WriteInterval at
// most while tasks come in: its queued journal entries (charges, top-ups), the entries whose
// sources show them (forgotten), and the summary of the books. A write goes before its
// interval ends when it carries the charge of every task the account holds and no task came
// since the last one (book.chargesDue): nothing would share it by waiting.

// schedule starts the account's writer if there is something to write and none runs. Call it
// with b.mu held.
func (l *Ledger) schedule(b *book) {
	// Not once the ledger stopped: a writer would return at once and its exit schedule the
	// next, a goroutine spawned and ended in a loop for every account left to write.
	if b.flushing || !b.built || b.fenced || b.account == nil || l.ctx == nil || l.ctx.Err() != nil {
		return
	}
	if !b.dirty && len(b.queued) == 0 && !l.forgettable(b, b.check) {
		return
	}
	b.flushing = true
	go l.writer(l.ctx, b)
}

// writer writes the account until nothing is left to write.
func (l *Ledger) writer(ctx context.Context, b *book) {
	defer func() {
		b.mu.Lock()
		b.flushing = false
		l.schedule(b) // something came in after the last look
		b.mu.Unlock()
	}()
	for ctx.Err() == nil {
		b.mu.Lock()
		wait := b.lastWrite.Add(l.cfg.WriteInterval).Sub(l.cfg.Clock.Now())
		early := wait > 0 && b.chargesDue()
		if early {
			wait = 0
		}
		b.mu.Unlock()
		if wait > 0 {
			woken, err := sleepOrWake(ctx, l.cfg.Clock, wait, b.wake)
			if err != nil {
				return
			}
			if woken {
				continue // charges due (or a wake left from before): look again
			}
		}
		b.mu.Lock()
		if b.fenced || b.account == nil || !b.built ||
			(!b.dirty && len(b.queued) == 0 && !l.forgettable(b, b.check)) {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		p := l.plan(b)
		work := b.dirty || len(b.queued) > 0
		b.dirty, b.check = false, false
		b.writing, b.seenRV, b.seen = true, "", nil
		b.admittedSinceWrite, b.wroteEarly = false, early
		b.mu.Unlock()

		if !l.resolveFates(ctx, b.namespace, p) && !work {
			// Only entries whose sources do not show them yet: nothing to write. The next
			// change of the account looks again, one interval later at the soonest.
			b.mu.Lock()
			b.lastWrite = l.cfg.Clock.Now()
			b.flushing, b.writing = false, false
			b.mu.Unlock()
			return
		}
		written, err := l.commit(ctx, b, p)

		b.mu.Lock()
		b.lastWrite = l.cfg.Clock.Now()
		b.writing = false
		if b.account == nil || b.account.UID != p.base.UID {
			// The account went (and maybe a new one of its name was built) while the write
			// was on its way: its answer is about books that are gone.
			b.mu.Unlock()
			continue
		}
		if err != nil {
			b.dirty = true
			var fenced *fencedError
			if errors.As(err, &fenced) {
				l.stepDown(b, fenced.authority)
			} else if ctx.Err() == nil {
				l.cfg.Logger.Error(err, "writing the account; retrying", "namespace", b.namespace)
			}
		} else {
			l.landed(b, p, written)
			if newer(b.seenRV, written.ResourceVersion) {
				// Someone wrote the account after this write (an administrator suspended or
				// deleted it): its copy is the books' account, with the books' status, as
				// accountEvent takes an edit (the copy written is from before it, and
				// accepting reads the spec and the deletion from the books' account); the
				// next write puts the books' status back over any edit of it.
				status := b.account.Status
				b.account = b.seen.DeepCopy()
				b.account.Status = status
				b.dirty = true
			}
		}
		b.mu.Unlock()
	}
}

// plan is one write of an account: what it starts from and what it changes.
type plan struct {
	base    *videogenv1alpha1.PointAccount
	entries []videogenv1alpha1.JournalEntry // queued, to add unless already in the journal
	fates   map[types.UID]fate              // of the entries already in the journal
	frozen  int64                           // the books' frozen once this write lands: the charges it carries no longer hold
	holds   int32
	now     metav1.Time
}

// Tidy has the account's next write read the sources of journal entries whose fate the books do
// not know (they left the books unseen), so that the journal empties when the account is idle
// too. The PointAccount controller calls it while the journal is not empty.
func (l *Ledger) Tidy(namespace string) {
	b, err := l.lockBook(namespace)
	if err != nil {
		return
	}
	defer b.mu.Unlock()
	if b.account != nil && len(b.account.Status.Journal) > 0 {
		b.check = true
		l.schedule(b)
	}
}

// forgettable reports whether a journal entry may go, as far as the books know (so a write is
// worth it); with check, also whether one's source must be read to know.
func (l *Ledger) forgettable(b *book, check bool) bool {
	if b.account == nil {
		return false
	}
	for _, j := range b.account.Status.Journal {
		if f := b.fateOf(j); f != fateUnknown && (check || f != fateCheck) {
			return true
		}
	}
	return false
}

// maxJournalBytes bounds the journal an account write carries: etcd refuses a request over
// 1.5 MiB, and a refused write would be retried with the same entries, and more, for ever.
// Entries beyond it wait for the next write (a second later), once earlier ones are forgotten.
const maxJournalBytes = 512 << 10

// entrySize is about what a journal entry takes in the account (its JSON).
func entrySize(j videogenv1alpha1.JournalEntry) int {
	data, _ := json.Marshal(j)
	return len(data)
}

// plan snapshots what the next write does. Call it with b.mu held.
func (l *Ledger) plan(b *book) *plan {
	p := &plan{
		base:   b.account.DeepCopy(),
		fates:  map[types.UID]fate{},
		frozen: b.frozen,
		holds:  int32(b.holds),
		now:    metav1.NewTime(l.cfg.Clock.Now()),
	}
	// Room: what the journal keeps after this write (the entries it may forget do not count),
	// filled in the order the entries were queued. The first that does not fit stops the
	// rest, so that it is written once the journal has drained, whatever keeps coming behind
	// it (alone, if it is larger than the limit).
	size := 0
	for _, j := range b.account.Status.Journal {
		if f := b.fateOf(j); f == fateUnknown || f == fateCheck {
			size += entrySize(j)
		}
	}
	for _, uid := range b.queueOrder() {
		q := b.queued[uid]
		n := entrySize(q)
		if size > 0 && size+n > maxJournalBytes {
			break
		}
		size += n
		p.entries = append(p.entries, q)
		// Its hold becomes spent in this write; a task dropped since (deleted, or replaced by
		// one of the same name) holds nothing already, though its charge is still written.
		if e := b.tasks[q.Name]; q.Kind == videogenv1alpha1.JournalCharge && e != nil && e.uid == q.UID && e.state == charging {
			p.frozen -= q.Amount
			p.holds--
		}
	}
	for _, j := range b.account.Status.Journal {
		p.fates[j.UID] = b.fateOf(j)
	}
	return p
}

// resolveFates reads the sources of the entries whose fate the books do not know (they left
// the books before their final status was seen). It reports whether any entry may go.
func (l *Ledger) resolveFates(ctx context.Context, namespace string, p *plan) bool {
	for _, j := range p.base.Status.Journal {
		if p.fates[j.UID] != fateCheck {
			continue
		}
		key := client.ObjectKey{Namespace: namespace, Name: j.Name}
		var obj client.Object = &videogenv1alpha1.VideoTask{}
		if j.Kind == videogenv1alpha1.JournalTopUp || j.Kind == videogenv1alpha1.JournalRefusal {
			obj = &videogenv1alpha1.PointTopUp{}
		}
		err := l.cfg.Reader.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err), err == nil && obj.GetUID() != j.UID:
			p.fates[j.UID] = fateGone
		case err != nil:
			p.fates[j.UID] = fateUnknown // keep it; the next write looks again
		case j.Kind == videogenv1alpha1.JournalTopUp && obj.(*videogenv1alpha1.PointTopUp).Status.AppliedAt == nil:
			// Only its appliedAt shows a credit: a refusal in its status was written by hand
			// (the ledger refuses before crediting), and the entry keeps the reference.
			p.fates[j.UID] = fateUnknown
		default:
			p.fates[j.UID] = fateOfSource(obj)
		}
	}
	for _, f := range p.fates {
		if f != fateUnknown {
			return true
		}
	}
	return false
}

// fateOfSource is what a source's fresh copy says about its journal entry.
func fateOfSource(obj client.Object) fate {
	switch o := obj.(type) {
	case *videogenv1alpha1.VideoTask:
		switch {
		case o.Status.Charge == videogenv1alpha1.ChargeDeducted:
			return fateDeducted
		case o.Status.Charge == videogenv1alpha1.ChargeRefunded, o.Status.Phase == videogenv1alpha1.TaskFailed:
			// Refunded, or Failed with nothing charged (an earlier manager's late reject):
			// either way the task says it was not charged, so the charge is given back.
			return fateRefunded
		}
	case *videogenv1alpha1.PointTopUp:
		if o.Status.AppliedAt != nil || o.RefusedForGood() {
			return fateDeducted
		}
	}
	return fateUnknown
}

// commit writes the plan. What it writes is the plan applied to the status the ledger last
// wrote (p.base's), whatever the stored copy says: the figures are absolute, so a write that
// landed but reported an error is written again with the same figures, never added twice, and
// a status somebody else wrote is overwritten. A re-read after a conflict or a doubtful error
// brings only the copy's resourceVersion, metadata and spec, and whether another manager took
// the account over.
func (l *Ledger) commit(ctx context.Context, b *book, p *plan) (*videogenv1alpha1.PointAccount, error) {
	base := p.base
	for attempt := 0; ; attempt++ {
		acct := base.DeepCopy()
		acct.Status = *p.base.Status.DeepCopy()
		apply(acct, p)
		err := l.cfg.Client.Status().Update(ctx, acct)
		if err == nil {
			return acct, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !apierrors.IsConflict(err) {
			// It may have landed, or not: the fresh copy tells (after a pause: the
			// kube-apiserver may be struggling).
			if sleep(ctx, l.cfg.Clock, min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)) != nil {
				return nil, ctx.Err()
			}
		}
		// Read again until answered (with pauses: writing again from the old copy would only
		// conflict, at once, if the write landed); the writer tries again later if it is not.
		fresh := &videogenv1alpha1.PointAccount{}
		readBack := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6, Cap: 2 * time.Second}
		if err := retry.OnError(readBack, func(err error) bool { return !apierrors.IsNotFound(err) && ctx.Err() == nil }, func() error {
			return l.cfg.Reader.Get(ctx, client.ObjectKeyFromObject(base), fresh)
		}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("the account is gone: %w", err)
			}
			return nil, fmt.Errorf("reading the account back: %w", err)
		}
		if fresh.UID != base.UID {
			return nil, fmt.Errorf("the account was replaced by a new one")
		}
		if fresh.Status.Authority != l.cfg.Identity {
			if l.cfg.Lease == nil {
				return nil, &fencedError{authority: fresh.Status.Authority}
			}
			if err := l.inTerm(ctx); errors.Is(err, errLostElection) {
				return nil, &fencedError{authority: fresh.Status.Authority}
			} else if err != nil {
				return nil, err // the writer tries again
			}
			// This manager holds the Lease in the term of its books: the fence is that of a
			// manager deposed before, which wrote nothing else and exits. The write carries
			// this manager's name back.
			l.cfg.Logger.Info("writing over the fence of a manager that lost its Lease", "namespace", b.namespace, "authority", fresh.Status.Authority)
		}
		base = fresh
		if attempt >= 20 {
			return nil, fmt.Errorf("writing the account: %w", err)
		}
	}
}

// apply changes acct as the plan says: queued entries not already in the journal added (with
// their amounts), entries whose source shows them removed (a refunded charge's points back),
// the summary and conditions.
func apply(acct *videogenv1alpha1.PointAccount, p *plan) {
	st := &acct.Status
	var kept []videogenv1alpha1.JournalEntry
	for _, j := range st.Journal {
		switch p.fates[j.UID] {
		case fateDeducted, fateGone:
		case fateRefunded:
			st.Spent -= j.Amount
		default:
			kept = append(kept, j)
		}
	}
	inJournal := map[types.UID]bool{}
	for _, j := range st.Journal {
		inJournal[j.UID] = true
	}
	frozen, holds := p.frozen, p.holds
	var added []int
	for _, e := range p.entries {
		if inJournal[e.UID] {
			continue // landed with an earlier attempt
		}
		e.At = p.now
		switch e.Kind {
		case videogenv1alpha1.JournalCharge:
			st.Spent += e.Amount
		case videogenv1alpha1.JournalTopUp:
			st.Credited += e.Amount
			added = append(added, len(kept))
		}
		// A refusal moves nothing: its entry only records it.
		kept = append(kept, e)
	}
	st.Journal = kept
	st.Frozen = max(frozen, 0)
	st.Holds = max(holds, 0)
	st.Balance = st.Credited - st.Spent - st.Frozen
	// Each top-up's balance is the account's after it and before the top-ups after it in the
	// journal, so that several in one write read as a sequence, as they replay.
	after := st.Balance
	for _, i := range slices.Backward(added) {
		balance := after
		st.Journal[i].BalanceAfter = &balance
		after -= st.Journal[i].Amount
	}
	setConditions(acct)
}

// setConditions sets Ready and Funded from the account's spec and figures.
func setConditions(acct *videogenv1alpha1.PointAccount) {
	st := &acct.Status
	ready := metav1.Condition{Type: videogenv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: videogenv1alpha1.ReasonActive, Message: "The account accepts new tasks"}
	switch {
	case st.Balance < 0 || st.Frozen < 0 || st.Spent < 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonInvariantViolated
		ready.Message = fmt.Sprintf("The books do not add up: balance %d, frozen %d, spent %d, credited %d", st.Balance, st.Frozen, st.Spent, st.Credited)
	case !acct.DeletionTimestamp.IsZero():
		ready.Status, ready.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonClosing
		ready.Message = closingMessage(acct.Namespace, st)
	case acct.Spec.Suspended:
		ready.Status, ready.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonSuspended
		ready.Message = "The account is suspended: it accepts no new tasks"
	}
	funded := metav1.Condition{Type: videogenv1alpha1.ConditionFunded, Status: metav1.ConditionTrue,
		Reason: videogenv1alpha1.ReasonHasBalance, Message: "Points are available for new tasks"}
	if st.Balance <= 0 {
		funded.Status, funded.Reason = metav1.ConditionFalse, videogenv1alpha1.ReasonDepleted
		funded.Message = "No points available; ask an administrator for a top-up"
	}
	for _, c := range []metav1.Condition{ready, funded} {
		c.ObservedGeneration = acct.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	st.ObservedGeneration = acct.Generation
}

// closingMessage says what keeps a deleted account, and what to do: the debit as the CLI takes
// it (AMOUNT has no sign), as the pointaccount-close-when-empty policy says it.
func closingMessage(namespace string, st *videogenv1alpha1.PointAccountStatus) string {
	if st.Balance == 0 && st.Holds == 0 && st.Frozen == 0 && len(st.Journal) == 0 {
		return "Deleting: the account is empty and goes now"
	}
	msg := fmt.Sprintf("Deleting: the account goes once it is empty; it has %d points available and %d tasks holding %d points.", st.Balance, st.Holds, st.Frozen)
	const nowhere = " (in a namespace being deleted nothing can be created: docs/ledger.md, Deleting things)."
	switch {
	case st.Holds > 0 || st.Frozen > 0:
		// Tasks first: a task canceled refunds its hold into the balance, so a debit made
		// before it ends would leave that behind.
		msg += fmt.Sprintf(" Cancel its tasks or wait for them to end, then debit what is left (videogenctl account show %s says it): videogenctl topup %s AMOUNT --debit --reference REF --note WHY"+nowhere,
			namespace, namespace)
	case st.Balance > 0:
		msg += fmt.Sprintf(" Debit what is left (a PointTopUp of amount %d with a note): videogenctl topup %s %d --debit --reference REF --note WHY"+nowhere,
			-st.Balance, namespace, st.Balance)
	}
	return msg
}

// landed brings a successful write into the books: the account as written, the charges and
// top-ups in its journal, the entries it forgot. Call it with b.mu held.
func (l *Ledger) landed(b *book, p *plan, written *videogenv1alpha1.PointAccount) {
	b.account = written
	inJournal := map[types.UID]bool{}
	for _, j := range written.Status.Journal {
		inJournal[j.UID] = true
	}
	for _, e := range p.entries {
		q, ok := b.queued[e.UID]
		if !ok || !inJournal[e.UID] {
			continue
		}
		delete(b.queued, e.UID)
		switch q.Kind {
		case videogenv1alpha1.JournalCharge:
			if t := b.tasks[q.Name]; t != nil && t.uid == q.UID {
				if t.state == charging {
					b.set(t, charged)
				}
			} else if b.fates[q.UID] == fateUnknown {
				b.fates[q.UID] = fateCheck // deleted while its charge waited: read it before forgetting
			}
			pointsMoved.WithLabelValues(b.namespace, "deduct").Add(float64(q.Amount))
			l.requeueTask(b.namespace, q.Name)
		case videogenv1alpha1.JournalTopUp:
			if q.Amount < 0 {
				b.debits += q.Amount // no longer queued: the journal has it
				pointsMoved.WithLabelValues(b.namespace, "debit").Add(float64(-q.Amount))
			} else {
				pointsMoved.WithLabelValues(b.namespace, "topup").Add(float64(q.Amount))
			}
			l.requeueTopUp(b.namespace, q.Name)
			for _, name := range b.refWaiters[q.UID] {
				l.requeueTopUp(b.namespace, name) // its reference is used now
			}
			delete(b.refWaiters, q.UID)
		case videogenv1alpha1.JournalRefusal:
			l.requeueTopUp(b.namespace, q.Name)
		}
	}
	for uid, f := range p.fates {
		if f == fateUnknown || inJournal[uid] {
			continue
		}
		delete(b.fates, uid)
		delete(b.topUpsShown, uid)
	}
	for uid := range b.fates {
		if _, queued := b.queued[uid]; !queued && !inJournal[uid] {
			delete(b.fates, uid) // a charge taken back while a write was on its way that did not carry it
		}
	}
	if !written.DeletionTimestamp.IsZero() {
		l.requeueAccount(b.namespace)
	}
}

// fencedError: the account names another manager as its authority.
type fencedError struct{ authority string }

func (e *fencedError) Error() string {
	return fmt.Sprintf("%v: %q keeps the books", ErrFenced, e.authority)
}
func (e *fencedError) Unwrap() error { return ErrFenced }
