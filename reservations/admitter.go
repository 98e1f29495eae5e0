// Package reservations admits tasks against blocks of points that a REST apiserver replica
// reserves on a PointAccount with one compare-and-swap, so that a busy account does not pay a
// compare-and-swap per submission before its create (docs/benchmarks.md, section 1).
//
// The 402 rule stays exact for one replica: a task is admitted only if the replica's unused
// reserved points plus the account's balance cover its price, decided on a fresh read when the
// reservation runs short. Every point stays on the PointAccount: a reservation is a hold
// (counted in frozen), an admitted task moves its price from the reservation into a hold of its
// own right after it is created (ledger.FreezeFrom, keyed by task), and what is left of a
// reservation returns to the balance when the replica has been idle for a moment, or when the
// manager sees that nobody renewed it for its TTL (the replica died).
//
// Fencing: a replica admits under a reservation only until FenceWindow after it sent the last
// renewal, and gives each create MaxCreate to finish; the manager's reservation TTL, counted
// from when it first saw the last renewal, must be longer than both together.
package reservations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// Config configures an Admitter. Zero values take the defaults.
type Config struct {
	Ledger *ledger.Ledger
	// Cache reads PointAccounts from an informer, to refuse suspended or full accounts without
	// a write (optional); Fresh (the API reader) confirms such a refusal, as the cache may lag.
	Cache, Fresh client.Reader
	// Holder starts this process's reservation names (default: random); at most 40 characters
	// of [a-z0-9-].
	Holder string
	// MinTasks is the size of an account's first reservation, in tasks (default 8). A refill
	// within a second of the last one doubles it, up to MaxTasks (default 1024); a refill after
	// a quiet minute starts at MinTasks again.
	MinTasks, MaxTasks int
	// IdleRelease returns a reservation that admitted nothing for this long (default 2 s).
	IdleRelease time.Duration
	// FenceWindow is how long after sending a renewal the replica admits under it (default 10 s).
	FenceWindow time.Duration
	// MaxCreate bounds the create of an admitted task (default 10 s).
	MaxCreate time.Duration
	// Linger is how long a created task's move into its own hold waits to share one write with
	// the next tasks' (default 100 ms; on an account with more than 250 holds, Linger per 250
	// holds, up to maxLinger): a compare-and-swap on a busy account carries all of its holds,
	// so one per task would cost the control plane more than the creates. Keep it well under
	// the VideoTask controller's 2 s wait for the move.
	Linger time.Duration
	// RecallWait is how long an admission short of points waits for other replicas to return
	// their reservations after recalling them (default 2 s) before it answers 402.
	RecallWait time.Duration
	// CacheTTL is how long an account's suspension and hold count read from Cache are reused
	// (default 100 ms): each read copies the whole account, holds included.
	CacheTTL time.Duration
	// MaxHolds is the limit of unsettled tasks (default: the Ledger's).
	MaxHolds int
	Now      func() time.Time
	Logger   *slog.Logger
}

// Admitter hands out admissions against per-account reservations. Safe for concurrent use.
type Admitter struct {
	cfg      Config
	seq      atomic.Uint64
	mu       sync.Mutex
	accounts map[string]*account
}

// account is one account's reservation as this process sees it.
type account struct {
	mu         sync.Mutex
	namespace  string
	name       string    // the current reservation ("" none)
	budget     int64     // its points not yet admitted
	renewed    time.Time // when its last renewal was sent
	tasks      int       // size of the next refill, in tasks
	lastRefill time.Time
	lastGrant  int64
	ahead      bool // a refillAhead is on its way
	// admitting holds the tickets whose create has not ended, by task name (Admit lets one
	// ticket per task exist at a time).
	admitting map[string]*Ticket
	lastUse   time.Time
	refill    chan struct{} // closed when the refill in flight ends; nil if none
	moves     []ledger.Op   // FreezeFrom of created tasks, waiting for the linger to end
	// From the cache, reused for CacheTTL: see precheck.
	readAt    time.Time
	suspended bool
	holds     int
	recalled  time.Time // status.reservationsRecalledAt
	// recallSeen is the last recall this process acted on (or made); holdOff: until then a
	// refill reserves only what the admission needs, so a recalled reservation is not
	// hoarded again at once.
	recallSeen time.Time
	holdOff    time.Time
}

// New returns an Admitter; run Run to release idle reservations.
func New(cfg Config) *Admitter {
	if cfg.Holder == "" {
		var b [5]byte
		_, _ = rand.Read(b[:])
		cfg.Holder = "r-" + hex.EncodeToString(b[:])
	}
	orDefault(&cfg.MinTasks, 8)
	if cfg.MaxTasks < cfg.MinTasks {
		cfg.MaxTasks = max(cfg.MinTasks, 1024)
	}
	orDefault(&cfg.IdleRelease, 2*time.Second)
	orDefault(&cfg.FenceWindow, 10*time.Second)
	orDefault(&cfg.MaxCreate, 10*time.Second)
	orDefault(&cfg.RecallWait, 2*time.Second)
	orDefault(&cfg.CacheTTL, 100*time.Millisecond)
	orDefault(&cfg.Linger, 100*time.Millisecond)
	if cfg.MaxHolds <= 0 {
		cfg.MaxHolds = cfg.Ledger.MaxHolds()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Admitter{cfg: cfg, accounts: map[string]*account{}}
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Ticket is one admitted task's claim on a reservation. End it with Created, Refused or
// Unknown; only the first of those counts, so `defer t.Unknown()` covers a panic.
type Ticket struct {
	ad      *Admitter
	a       *account
	task    string
	ended   bool // guarded by a.mu
	created bool // guarded by a.mu
	done    chan struct{}
	// Reservation is the name to put in the task's LabelReservation label.
	Reservation string
	// Price is what was admitted.
	Price int64
	// Deadline is when the task's create must have ended.
	Deadline time.Time
}

// ErrAdmitted: a request for the same task was admitted meanwhile and created it; answer as a
// replay of that request.
var ErrAdmitted = errors.New("a request for the same task was admitted and created it")

// Admit reserves price points of namespace's account for the task, refilling the replica's
// reservation when it is short. Requests for the same task (one Idempotency-Key) wait for one
// another, so replays do not use up the reservation. It refuses with ErrAdmitted or the
// ledger's errors:
// *ledger.InsufficientBalanceError (Available counts this replica's unused reserved points),
// ledger.ErrAccountSuspended, ledger.ErrAccountNotFound, ledger.ErrTooManyHolds.
func (ad *Admitter) Admit(ctx context.Context, namespace, task string, price int64) (*Ticket, error) {
	if price < 0 {
		return nil, fmt.Errorf("%w: price %d", ledger.ErrInvalidAmount, price)
	}
	a := ad.account(namespace)
	if err := ad.precheck(ctx, a); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if t := a.admitting[task]; t != nil {
			a.mu.Unlock()
			select {
			case <-t.done:
			case <-ctx.Done():
				a.mu.Lock()
				return nil, ctx.Err()
			}
			a.mu.Lock()
			if t.created {
				return nil, ErrAdmitted
			}
			continue
		}
		now := ad.cfg.Now()
		if a.name != "" && a.budget >= price && now.Sub(a.renewed) < ad.cfg.FenceWindow {
			a.budget -= price
			a.lastUse = now
			if !a.ahead && a.refill == nil && ad.dueAhead(a, now) {
				// Top up (and renew) in the background before anyone has to wait for it.
				a.ahead = true
				go ad.refillAhead(ctx, a, a.name, price)
			}
			t := &Ticket{ad: ad, a: a, task: task, done: make(chan struct{}), Reservation: a.name, Price: price, Deadline: now.Add(ad.cfg.MaxCreate)}
			a.admitting[task] = t
			return t, nil
		}
		if a.refill != nil { // someone is refilling: wait for it and look again
			ch := a.refill
			a.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				a.mu.Lock()
				return nil, ctx.Err()
			}
			a.mu.Lock()
			continue
		}
		if err := ad.refill(ctx, a, price, now, false); err != nil {
			return nil, err
		}
	}
}

// refill renews the account's reservation and tops it up to cover price and the next few
// tasks, or makes a new one; ahead (a top-up before anyone needs it) never recalls other
// replicas' reservations. Called with a.mu held; it is released during the write.
func (ad *Admitter) refill(ctx context.Context, a *account, price int64, now time.Time, ahead bool) error {
	done := make(chan struct{})
	a.refill = done
	defer func() { a.refill = nil; close(done) }()

	renew := a.name != ""
	name := a.name
	switch {
	case !renew:
		name = fmt.Sprintf("%s-%d", ad.cfg.Holder, ad.seq.Add(1))
		if now.Sub(a.lastRefill) > time.Minute {
			a.tasks = ad.cfg.MinTasks
		}
	case now.Sub(a.lastRefill) < time.Second:
		a.tasks = min(2*a.tasks, ad.cfg.MaxTasks)
	}
	a.tasks = max(a.tasks, ad.cfg.MinTasks)
	budget := a.budget
	need := max(0, price-budget)
	want := max(need, int64(a.tasks)*price-budget)
	if now.Before(a.holdOff) {
		want = need
	}

	a.mu.Unlock()
	// Not the request's context: the waiters share this write, and a write cut short may
	// still happen.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ad.cfg.MaxCreate)
	res, err := ad.cfg.Ledger.Do(wctx, a.namespace, ledger.Reserve(name, want, need, renew))
	var short *ledger.InsufficientBalanceError
	if errors.As(err, &short) && !ahead && ad.recall(wctx, a, name, need) {
		res, err = ad.cfg.Ledger.Do(wctx, a.namespace, ledger.Reserve(name, need, need, renew))
	}
	cancel()
	a.mu.Lock()

	switch {
	case err == nil:
		a.name = name
		a.budget += res.Amount
		a.renewed, a.lastRefill = now, now
		a.lastGrant = max(res.Amount, a.lastGrant/2)
		return nil
	case errors.Is(err, ledger.ErrReservationGone):
		// The manager released it (we were out of touch for its TTL): start a new one.
		a.name, a.budget = "", 0
		return nil
	case errors.As(err, &short):
		return &ledger.InsufficientBalanceError{Account: a.namespace, Required: price, Available: short.Available + a.budget}
	case !renew && !ledger.Refused(err):
		// The write may have happened: remember the name, so an idle release returns it.
		a.name, a.budget, a.renewed = name, 0, time.Time{}
	}
	return err
}

// recall asks the other replicas to return their reservations when together with the balance
// they hold the points this admission needs, and waits up to RecallWait for the balance to
// cover need. It reports whether it does (then reserve again). Called without a.mu.
func (ad *Admitter) recall(ctx context.Context, a *account, own string, need int64) bool {
	if ad.cfg.Fresh == nil {
		return false
	}
	key := client.ObjectKey{Namespace: a.namespace, Name: videogenv1alpha1.PointAccountName}
	read := func() (*videogenv1alpha1.PointAccount, bool) {
		acct := &videogenv1alpha1.PointAccount{}
		return acct, ad.cfg.Fresh.Get(ctx, key, acct) == nil
	}
	othersHold := func(acct *videogenv1alpha1.PointAccount) int64 {
		var n int64
		for _, r := range acct.Status.Reservations {
			if r.Name != own {
				n += r.Amount
			}
		}
		return n
	}
	acct, ok := read()
	if !ok {
		return false
	}
	if others := othersHold(acct); others == 0 || acct.Status.Balance+others < need {
		return false // nothing to wait for: the account really is short
	}
	if _, err := ad.cfg.Ledger.Do(ctx, a.namespace, ledger.RecallReservations()); err != nil {
		return false
	}
	deadline := time.Now().Add(ad.cfg.RecallWait)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		acct, ok = read()
		if !ok {
			return false
		}
		if at := acct.Status.ReservationsRecalledAt; at != nil {
			a.mu.Lock()
			a.recallSeen = at.Time // our own recall: nothing to return for it
			a.mu.Unlock()
		}
		if acct.Status.Balance >= need {
			return true
		}
		if othersHold(acct) == 0 {
			return false // all returned, and still short
		}
	}
	return false
}

// refillAhead refills the reservation name early, unless it changed or a refill is on the way.
// A refusal (the balance ran short) is left for the admission that needs the points to see.
func (ad *Admitter) refillAhead(ctx context.Context, a *account, name string, price int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ahead = false
	now := ad.cfg.Now()
	if a.refill != nil || a.name != name || !ad.dueAhead(a, now) {
		return
	}
	_ = ad.refill(ctx, a, price, now, true)
}

// dueAhead says whether the reservation should be topped up or renewed before it runs out:
// under a quarter of the last grant left, or half the fence window gone.
func (ad *Admitter) dueAhead(a *account, now time.Time) bool {
	return a.budget < a.lastGrant/4 || now.Sub(a.renewed) > ad.cfg.FenceWindow/2
}

// precheck refuses a suspended account, or one at its limit of unsettled tasks, as the
// ledger would: admissions from the reservation do not go through the ledger.
func (ad *Admitter) precheck(ctx context.Context, a *account) error {
	if ad.cfg.Cache == nil {
		return nil
	}
	namespace := a.namespace
	key := client.ObjectKey{Namespace: namespace, Name: videogenv1alpha1.PointAccountName}
	a.mu.Lock()
	fresh := time.Since(a.readAt) < ad.cfg.CacheTTL
	suspended, holds := a.suspended, a.holds
	a.mu.Unlock()
	if !fresh {
		acct := &videogenv1alpha1.PointAccount{}
		if err := ad.cfg.Cache.Get(ctx, key, acct); err != nil {
			return nil // not cached (yet): the refill's fresh read decides
		}
		suspended, holds = acct.Spec.Suspended, acct.Status.HoldCount()
		a.mu.Lock()
		a.readAt, a.suspended, a.holds = time.Now(), suspended, holds
		if at := acct.Status.ReservationsRecalledAt; at != nil {
			a.recalled = at.Time
		}
		a.mu.Unlock()
	}
	if !suspended && holds < ad.cfg.MaxHolds {
		return nil
	}
	reader := ad.cfg.Cache
	if ad.cfg.Fresh != nil {
		reader = ad.cfg.Fresh // a refusal is confirmed on a fresh read
	}
	acct := &videogenv1alpha1.PointAccount{}
	if err := reader.Get(ctx, key, acct); err != nil {
		return nil
	}
	switch {
	case acct.Spec.Suspended:
		return fmt.Errorf("%w: %q", ledger.ErrAccountSuspended, namespace)
	case acct.Status.HoldCount() >= ad.cfg.MaxHolds:
		return fmt.Errorf("%w: account %q has %d tasks waiting to settle, the most it may have", ledger.ErrTooManyHolds, namespace, acct.Status.HoldCount())
	}
	return nil
}

func (ad *Admitter) account(namespace string) *account {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	a := ad.accounts[namespace]
	if a == nil {
		a = &account{namespace: namespace, tasks: ad.cfg.MinTasks, admitting: map[string]*Ticket{}}
		ad.accounts[namespace] = a
	}
	return a
}

// maxLinger bounds how long a move waits on a big account: the VideoTask controller waits
// for it before starting the task, at most 2 s after the task's creationTimestamp, which has
// one-second resolution.
const maxLinger = 500 * time.Millisecond

// moveLinger is how long the first of an account's new moves waits for others (see
// Config.Linger): longer on an account with many holds, whose every write carries them all
// (docs/benchmarks.md, section 1).
func moveLinger(base time.Duration, holds int) time.Duration {
	return min(max(base, base*time.Duration(holds)/250), max(base, maxLinger))
}

// maxMoves bounds the task moves one write carries.
const maxMoves = 256

// Created moves the task's price from the reservation into its own hold, in one write with
// the other tasks created within Linger; if that fails, the VideoTask controller does it.
func (t *Ticket) Created() {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.ended {
		return
	}
	a.moves = append(a.moves, ledger.FreezeFrom(t.task, t.Price, t.Reservation))
	switch {
	case len(a.moves) >= maxMoves:
		t.ad.flush(a)
	case len(a.moves) == 1:
		time.AfterFunc(moveLinger(t.ad.cfg.Linger, a.holds), func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			t.ad.flush(a)
		})
	}
	t.created = true
	t.finish()
}

// flush queues the account's waiting moves as one ledger request; called with a.mu held, so
// that an idle release is always queued after the moves of its tasks.
func (ad *Admitter) flush(a *account) {
	if len(a.moves) == 0 {
		return
	}
	ops := a.moves
	a.moves = nil
	done := ad.cfg.Ledger.Start(a.namespace, ops...)
	go func() {
		for i, res := range <-done {
			if res.Err != nil {
				ad.cfg.Logger.Info("moving an admitted task's points into its hold failed; the controller retries",
					"namespace", a.namespace, "task", ops[i].Task(), "error", res.Err.Error())
			}
		}
	}()
}

// Refused gives the price back to the reservation: the task was definitely not created.
func (t *Ticket) Refused() { t.end(true) }

// Unknown ends an admission whose create may or may not have happened: its price stays in the
// reservation, which returns it to the balance when released if no task claims it.
func (t *Ticket) Unknown() { t.end(false) }

func (t *Ticket) end(giveBack bool) {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	if t.ended {
		return
	}
	t.finish()
	if giveBack && t.a.name == t.Reservation {
		t.a.budget += t.Price
	}
}

// finish ends the ticket; called with a.mu held.
func (t *Ticket) finish() {
	t.ended = true
	if t.a.admitting[t.task] == t {
		delete(t.a.admitting, t.task)
	}
	close(t.done)
}

// Run releases reservations idle for IdleRelease until ctx ends, then releases the idle ones
// once more (a graceful shutdown leaves nothing for the manager to expire).
func (ad *Admitter) Run(ctx context.Context) error {
	// Often enough that a recall is answered well within RecallWait.
	tick := time.NewTicker(max(min(ad.cfg.IdleRelease/4, 100*time.Millisecond), 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			ad.releaseIdle(ad.cfg.IdleRelease)
		case <-ctx.Done():
			for _, done := range ad.releaseIdle(0) {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
			}
			return nil
		}
	}
}

// newRecall reports whether another replica recalled the reservations since this process last
// acted on a recall, and if so holds off reserving more than needed for a while.
func (ad *Admitter) newRecall(a *account, now time.Time) bool {
	a.mu.Lock()
	held := a.name != ""
	a.mu.Unlock()
	if !held || ad.cfg.Cache == nil {
		return false
	}
	_ = ad.precheck(context.Background(), a) // refreshes a.recalled from the cache (at most every CacheTTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.recalled.After(a.recallSeen) {
		return false
	}
	a.holdOff = now.Add(2 * ad.cfg.RecallWait)
	return true
}

// releaseIdle releases every reservation that admitted nothing for idle and has no create in
// flight; the returned channels close when the writes it started end.
func (ad *Admitter) releaseIdle(idle time.Duration) []<-chan struct{} {
	ad.mu.Lock()
	accounts := make([]*account, 0, len(ad.accounts))
	for _, a := range ad.accounts {
		accounts = append(accounts, a)
	}
	ad.mu.Unlock()
	now := ad.cfg.Now()
	var started []<-chan struct{}
	for _, a := range accounts {
		recalled := ad.newRecall(a, now)
		a.mu.Lock()
		if idle == 0 || recalled {
			ad.flush(a) // shutting down, or recalled: nothing may wait for a timer
		}
		if a.name == "" || len(a.admitting) > 0 || a.refill != nil || (now.Sub(a.lastUse) < idle && !recalled) {
			a.mu.Unlock()
			continue
		}
		if recalled {
			a.recallSeen = a.recalled
		}
		name := a.name
		a.name, a.budget = "", 0
		// Queued after the FreezeFrom of every task admitted under it (their creates ended).
		ad.flush(a)
		done := ad.cfg.Ledger.Start(a.namespace, ledger.ReleaseReservation(name))
		a.mu.Unlock()
		ended := make(chan struct{})
		started = append(started, ended)
		go func(ns string) {
			defer close(ended)
			if res := <-done; res[0].Err != nil {
				ad.cfg.Logger.Info("releasing an idle reservation failed; the manager expires it",
					"namespace", ns, "reservation", name, "error", res[0].Err.Error())
			}
		}(a.namespace)
	}
	return started
}
