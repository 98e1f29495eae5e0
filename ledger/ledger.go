package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Ledger applies operations to PointAccounts. It is safe for concurrent use; operations for the
// same account that arrive while a write is in flight are coalesced into the next write.
// Several Ledgers (in several processes) may work on one account: they meet at the
// compare-and-swap and retry.
type Ledger struct {
	writer client.Client
	reader client.Reader
	cache  client.Reader // optional: an informer-backed reader of PointAccounts
	now    func() time.Time

	// MaxBatch bounds the operations in one write, which bounds the status size a write carries.
	maxBatch int
	// maxHolds bounds the unsettled tasks per account (see DefaultMaxHolds).
	maxHolds int
	// commitTimeout bounds one write including its conflict retries.
	commitTimeout time.Duration

	mu     sync.Mutex
	queues map[string]*queue
}

// Option configures a Ledger.
type Option func(*Ledger)

// WithClock sets the clock used for hold and settlement timestamps.
func WithClock(now func() time.Time) Option { return func(l *Ledger) { l.now = now } }

// WithMaxBatch sets the most operations one write carries (default 256).
func WithMaxBatch(n int) Option { return func(l *Ledger) { l.maxBatch = max(1, n) } }

// WithMaxHolds sets the most unsettled tasks an account may have (default DefaultMaxHolds).
func WithMaxHolds(n int) Option { return func(l *Ledger) { l.maxHolds = max(1, n) } }

// WithCache lets a write start from an informer's copy of the account when it is newer than
// this Ledger's own last write (another process wrote since): one conflict fewer. The
// compare-and-swap still decides, and refusals and no-ops are still decided on a fresh read.
func WithCache(r client.Reader) Option { return func(l *Ledger) { l.cache = r } }

// New returns a Ledger that writes with c and, after a conflict, re-reads with fresh (use the
// manager's APIReader so a retry never starts from a stale cache).
func New(c client.Client, fresh client.Reader, opts ...Option) *Ledger {
	l := &Ledger{
		writer:        c,
		reader:        fresh,
		now:           time.Now,
		maxBatch:      256,
		maxHolds:      DefaultMaxHolds,
		commitTimeout: 30 * time.Second,
		queues:        map[string]*queue{},
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

type request struct {
	ops  []Op
	done chan []Result
}

// queue holds the pending requests of one account and the last status this Ledger wrote, which
// is where the next write starts (a stale copy costs one conflict, a fresh one saves a read).
type queue struct {
	pending  []*request
	draining bool
	armed    bool // a StartWithin timer will start draining
	last     *videogenv1alpha1.PointAccount
	riders   []Op // see Piggyback
}

// maxRiders bounds the ops waiting to ride along per account; more are dropped (and trimmed
// later by the PointAccount controller).
const maxRiders = 1024

// Piggyback queues ops that move no points (ForgetSettlement, ForgetTopUp) to ride on the
// account's next write instead of costing a write of their own. Nothing waits for them: they
// are lost if no write comes or the process ends, so callers need a slower path that trims
// whatever is left (the PointAccount controller). Other ops are ignored.
func (l *Ledger) Piggyback(namespace string, ops ...Op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queueFor(namespace)
	for _, op := range ops {
		if (op.kind == opForgetSettlement || op.kind == opForgetTopUp) && len(q.riders) < maxRiders {
			q.riders = append(q.riders, op)
		}
	}
}

// queueFor returns namespace's queue, made if need be; call it with l.mu held.
func (l *Ledger) queueFor(namespace string) *queue {
	q := l.queues[namespace]
	if q == nil {
		q = &queue{}
		l.queues[namespace] = q
	}
	return q
}

// Apply applies ops to the account of namespace in one write, in order, and returns one Result
// per op. The error is for the whole call (the account is missing, the write kept failing, ctx
// ended); a refused op is reported in its Result. When ctx ends first, the ops may still be
// applied: callers must be able to find out (Freeze is keyed by task, so a retry is safe).
func (l *Ledger) Apply(ctx context.Context, namespace string, ops ...Op) ([]Result, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	if res, ok := l.knownRepeats(ctx, namespace, ops); ok {
		return res, nil
	}
	done := l.Start(namespace, ops...)
	select {
	case res := <-done:
		for _, r := range res {
			if r.Err != nil && isCallError(r.Err) {
				return res, r.Err
			}
		}
		return res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("ledger: waiting for account %q: %w", namespace, ctx.Err())
	}
}

// knownRepeats answers freezes whose holds the newest copy of the account this Ledger knows
// (its own last write or the informer's) shows already, without queueing them: a repeat found
// on an older copy stands (see commit), and queueing it would start the account's next write
// early, ahead of the ops waiting to share it (StartWithin).
func (l *Ledger) knownRepeats(ctx context.Context, namespace string, ops []Op) ([]Result, bool) {
	for _, op := range ops {
		if (op.kind != opFreeze && op.kind != opFreezeFrom) || op.amount < 0 {
			return nil, false
		}
	}
	st := l.peek(ctx, namespace)
	if st == nil {
		return nil, false
	}
	res := make([]Result, len(ops))
	for i, op := range ops {
		held, ok := st.HoldOf(op.task)
		if !ok {
			return nil, false
		}
		res[i] = Result{Amount: held, Balance: st.Balance, repeat: true}
	}
	return res, true
}

// peek returns the newest status of the account this Ledger knows without a read of the
// kube-apiserver (nil if none), to look at, never to change.
func (l *Ledger) peek(ctx context.Context, namespace string) *videogenv1alpha1.PointAccountStatus {
	l.mu.Lock()
	var last *videogenv1alpha1.PointAccount
	if q := l.queues[namespace]; q != nil {
		last = q.last // never changed once stored: commit works on a copy
	}
	l.mu.Unlock()
	if a := l.newest(ctx, namespace, last); a != nil {
		return &a.Status
	}
	return nil
}

// MaxHolds is the most unsettled tasks an account may have (see WithMaxHolds).
func (l *Ledger) MaxHolds() int { return l.maxHolds }

// Start queues ops for the account's next write and returns at once; the channel receives one
// Result per op (each op's Err is the call's error if the write failed). Ops queued one after
// the other are applied in that order. Nothing needs to read the channel.
func (l *Ledger) Start(namespace string, ops ...Op) <-chan []Result {
	req := &request{ops: ops, done: make(chan []Result, 1)}
	l.mu.Lock()
	q := l.queueFor(namespace)
	q.pending = append(q.pending, req)
	start := !q.draining
	q.draining = true
	l.mu.Unlock()
	if start {
		go l.drain(namespace, q)
	}
	return req.done
}

// StartWithin is Start for ops that nothing waits on soon (a settle whose decision is already
// recorded elsewhere): they are written within delay, with whatever else the account's next
// write carries, so that a busy account's settles share writes. They join an earlier write if
// one starts first.
func (l *Ledger) StartWithin(delay time.Duration, namespace string, ops ...Op) <-chan []Result {
	req := &request{ops: ops, done: make(chan []Result, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queueFor(namespace)
	q.pending = append(q.pending, req)
	if !q.draining && !q.armed {
		q.armed = true
		time.AfterFunc(delay, func() {
			l.mu.Lock()
			q.armed = false
			start := !q.draining && len(q.pending) > 0
			q.draining = q.draining || start
			l.mu.Unlock()
			if start {
				go l.drain(namespace, q)
			}
		})
	}
	return req.done
}

// Do applies one op and returns its result, with a refusal as the error.
func (l *Ledger) Do(ctx context.Context, namespace string, op Op) (Result, error) {
	res, err := l.Apply(ctx, namespace, op)
	if err != nil {
		return Result{}, err
	}
	return res[0], res[0].Err
}

// callError marks errors that concern the whole write rather than one op.
type callError struct{ err error }

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

func isCallError(err error) bool {
	_, ok := err.(*callError)
	return ok
}

// Refused reports whether err from Do or Apply means that the ledger decided against the op,
// so that nothing was written: the op's own refusal (short balance, suspended account, a limit,
// a bad amount, …) or an account that does not exist. A write that failed or was given up is
// not a refusal: it may have happened.
func Refused(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return !isCallError(err) || errors.Is(err, ErrAccountNotFound)
}

// drain writes batches for one account until its queue is empty.
func (l *Ledger) drain(namespace string, q *queue) {
	for {
		l.mu.Lock()
		batch, n := take(q.pending, l.maxBatch)
		q.pending = q.pending[n:]
		if len(batch) == 0 {
			q.draining = false
			l.mu.Unlock()
			return
		}
		last, riders := q.last, q.riders
		q.riders = nil
		l.mu.Unlock()

		results, written, carried := l.commit(namespace, last, batch, riders)
		l.mu.Lock()
		if written != nil {
			q.last = written
		} else {
			q.last = nil
		}
		if !carried {
			q.riders = append(riders, q.riders...)
		}
		l.mu.Unlock()
		for i, req := range batch {
			req.done <- results[i]
		}
	}
}

// take returns the first requests whose ops fit in limit (at least one request) and their count.
func take(pending []*request, limit int) ([]*request, int) {
	ops := 0
	for i, r := range pending {
		if i > 0 && ops+len(r.ops) > limit {
			return pending[:i], i
		}
		ops += len(r.ops)
	}
	return pending, len(pending)
}

// commit applies every request of the batch in one compare-and-swap, retrying on conflict,
// and the riders too when the batch writes anyway. It returns each request's results, the
// account as written (nil if nothing was written) and whether the riders were written.
func (l *Ledger) commit(namespace string, start *videogenv1alpha1.PointAccount, batch []*request, riders []Op) ([][]Result, *videogenv1alpha1.PointAccount, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.commitTimeout)
	defer cancel()
	key := types.NamespacedName{Namespace: namespace, Name: videogenv1alpha1.PointAccountName}
	backoff := 2 * time.Millisecond
	acct := l.newest(ctx, namespace, start)
	for {
		fresh := acct == nil
		if fresh {
			acct = &videogenv1alpha1.PointAccount{}
			if err := l.reader.Get(ctx, key, acct); err != nil {
				if apierrors.IsNotFound(err) {
					err = fmt.Errorf("%w: namespace %q has no PointAccount %q", ErrAccountNotFound, namespace, key.Name)
				} else {
					err = fmt.Errorf("ledger: reading account %q: %w", namespace, err)
				}
				return failAll(batch, &callError{err}), nil, false
			}
		}
		work := acct.DeepCopy()
		if err := Check(&work.Status); err != nil {
			// Never build on a broken status; an operator must look at it.
			return failAll(batch, &callError{fmt.Errorf("account %q before this write: %w", namespace, err)}), nil, false
		}
		b := openBook(&work.Status)
		results, changed := l.applyBatch(b, work, batch)
		// Riders never cause a write, they only join one (a rider whose record is gone
		// already is a no-op).
		carried := changed && len(riders) > 0
		if carried {
			now := l.now()
			for _, op := range riders {
				applyTo(b, work.Spec, namespace, l.maxHolds, op, now)
			}
		}
		if changed {
			b.close() // only a write needs the holds back in the status
		}
		if !fresh && (anyRefused(results) || (!changed && !allRepeats(results))) {
			// A refusal or a no-op decided on an older copy (our own last write or the cache)
			// could be wrong if another process wrote since (a top-up elsewhere, a hold made
			// elsewhere): only a write detects staleness, so decide those on a fresh read. A
			// repeat found its own record, which no one else removes: it stands.
			acct = nil
			continue
		}
		if !changed {
			fill(results, work.Status.Balance)
			return results, acct, false
		}
		if err := Check(&work.Status); err != nil {
			return failAll(batch, &callError{fmt.Errorf("account %q: refusing to write: %w", namespace, err)}), nil, false
		}
		err := l.writer.Status().Update(ctx, work)
		if err == nil {
			fill(results, work.Status.Balance)
			countMoves(namespace, batch, results)
			return results, work, carried
		}
		if !apierrors.IsConflict(err) {
			return failAll(batch, &callError{fmt.Errorf("ledger: writing account %q: %w", namespace, err)}), nil, false
		}
		// Someone else wrote first: start over from a fresh read, after a jittered pause so that
		// competing writers spread out.
		acct = nil
		select {
		case <-ctx.Done():
			return failAll(batch, &callError{fmt.Errorf("ledger: account %q stayed contended for %s: %w", namespace, l.commitTimeout, ctx.Err())}), nil, false
		case <-time.After(backoff/2 + rand.N(backoff)):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// newest returns start or the informer's copy of the account, whichever is newer (nil if there
// is neither); see CachedAccount.
func (l *Ledger) newest(ctx context.Context, namespace string, start *videogenv1alpha1.PointAccount) *videogenv1alpha1.PointAccount {
	if l.cache == nil {
		return start
	}
	cached := CachedAccount(ctx, l.cache, namespace)
	if cached == nil {
		return start
	}
	if start == nil {
		return cached
	}
	if cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, start.ResourceVersion); err == nil && cmp > 0 {
		return cached
	}
	return start
}

// CachedAccount returns the informer's own copy of namespace's PointAccount from cache (nil if
// it has none): read it or copy it, never change it. A busy account carries thousands of holds,
// and a deep copy of them for one look costs more than the look.
func CachedAccount(ctx context.Context, cache client.Reader, namespace string) *videogenv1alpha1.PointAccount {
	var accts videogenv1alpha1.PointAccountList
	if err := cache.List(ctx, &accts, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for i := range accts.Items {
		if accts.Items[i].Name == videogenv1alpha1.PointAccountName {
			return &accts.Items[i]
		}
	}
	return nil
}

func (l *Ledger) applyBatch(b *book, acct *videogenv1alpha1.PointAccount, batch []*request) ([][]Result, bool) {
	now := l.now()
	changed := false
	results := make([][]Result, len(batch))
	for i, req := range batch {
		results[i] = make([]Result, len(req.ops))
		for j, op := range req.ops {
			r := applyTo(b, acct.Spec, acct.Namespace, l.maxHolds, op, now)
			changed = changed || r.Changed
			results[i][j] = r
		}
	}
	return results, changed
}

func allRepeats(results [][]Result) bool {
	for _, rs := range results {
		for _, r := range rs {
			if !r.repeat {
				return false
			}
		}
	}
	return true
}

func anyRefused(results [][]Result) bool {
	for _, rs := range results {
		for _, r := range rs {
			if r.Err != nil {
				return true
			}
		}
	}
	return false
}

func fill(results [][]Result, balance int64) {
	for _, rs := range results {
		for j := range rs {
			rs[j].Balance = balance
		}
	}
}

func failAll(batch []*request, err error) [][]Result {
	out := make([][]Result, len(batch))
	for i, req := range batch {
		out[i] = make([]Result, len(req.ops))
		for j := range out[i] {
			out[i][j].Err = err
		}
	}
	return out
}
