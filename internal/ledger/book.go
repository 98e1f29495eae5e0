package ledger

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// state is where an open task stands in the books.
type state int

const (
	// unadmitted: seen, holds nothing (a task made with kubectl, before the controller admits it).
	unadmitted state = iota
	// pending: admitted by this ledger; the create or status write that records it is on its way.
	pending
	// held: holds its price (a signed create, or status.charge Frozen).
	held
	// charging: its success was observed; its charge waits for the account's next write.
	charging
	// charged: its charge is in the account's journal; its status does not say Deducted yet.
	charged
	// settled: its status says Deducted or Refunded, or it ended without holding points.
	settled
	// overdrawn: it shows an admission this ledger did not make and the balance cannot cover
	// (a late create of an earlier manager): the controller refuses it before it runs.
	overdrawn
)

var stateNames = [...]string{"unadmitted", "pending", "held", "charging", "charged", "settled", "overdrawn"}

func (s state) String() string { return stateNames[s] }

// holds reports whether a task in this state counts in frozen.
func (s state) holds() bool { return s == pending || s == held || s == charging }

// entry is one open task in the books.
type entry struct {
	uid   types.UID
	rv    string // the newest resourceVersion seen; older copies are stale
	state state
	price int64
	// base is the resourceVersion a pending kubectl admission's status write starts from: a
	// newer copy without the admission means the write did not land (and cannot any more).
	base string
	// admission is the signed annotation of the REST create this entry was counted for, while
	// that create has no task yet (uid ""): only a copy carrying it is that task.
	admission string
	// refunded: its status says Refunded; frozenCounted: its freeze was counted (the metric).
	refunded, frozenCounted bool
	// asked: the controller asked about the task before the create's answer or event named
	// it (View said Unknown); the ledger requeues it once either does.
	asked bool
	// evented: an informer event named the task (its deletion will come as one too). An entry
	// counted from a create's answer or a read is read again until one does (sweepUnevented),
	// unnamedSince telling for how long.
	evented      bool
	unnamedSince time.Time
}

// createsTask reports whether t is (a copy of) the task the REST create counted in e makes, or
// e was not counted for a create.
func (e *entry) createsTask(t *videogenv1alpha1.VideoTask) bool {
	return e.admission == "" || t.Annotations[videogenv1alpha1.AnnotationAdmission] == e.admission
}

// fate is what a charged task's status finally said, which decides its journal entry.
type fate int

const (
	fateUnknown  fate = iota
	fateDeducted      // its status says Deducted (or it is gone): the entry goes, the points stay spent
	fateRefunded      // its status says Refunded after all: the entry goes, the points come back
	fateGone          // it no longer exists: as fateDeducted
	// fateCheck: it left the books (closed or deleted) before its final status was seen: read
	// it before the entry is forgotten.
	fateCheck
)

// book is one account's books: the account as last written or read, and every open task.
// All of it is guarded by the ledger's lock of the account.
type book struct {
	mu        sync.Mutex
	namespace string
	account   *videogenv1alpha1.PointAccount // nil: there is no PointAccount
	// built: the books were built (after the fence write); until then nothing is decided.
	built    bool
	building bool
	fenced   bool // another manager took over the account: this one stops deciding for it
	// listRV is the resourceVersion of the list the books were built from: a task not in the
	// books whose copy is not newer was closed or deleted before it.
	listRV string

	tasks  map[string]*entry // by task name
	frozen int64
	holds  int
	// charging counts the holds whose charge waits for the account's next write, and
	// admittedSinceWrite says a hold began since the writer last took the books: when every
	// hold is charging and none began since, nothing more will share the next write by waiting
	// for it (see chargesDue), and wake tells a writer waiting for its interval. wroteEarly:
	// the last write went before its interval ended; the next one waits for it.
	charging           int
	admittedSinceWrite bool
	wroteEarly         bool
	wake               chan struct{}

	// queued are the journal entries waiting for the account's next write, by source UID, and
	// when each was queued (a count: written in that order, see plan).
	queued    map[types.UID]videogenv1alpha1.JournalEntry
	queuedSeq map[types.UID]uint64
	seq       uint64
	// debits is the sum of queued negative top-ups: they count against the balance at once.
	debits int64
	// fates are what the journal's charges' tasks finally said, by task UID.
	fates map[types.UID]fate
	// topUpsShown are the top-ups whose status shows them applied: their journal entries may go.
	topUpsShown map[types.UID]bool
	// references maps the reference (its referenceKey) of every top-up applied to an account
	// of the namespace, this one or an earlier one, or queued, to that top-up: a second top-up
	// with the same reference is refused.
	references map[string]appliedTopUp
	// refWaiters are the top-ups waiting for a queued top-up with their reference to be
	// written, by that top-up's UID (requeued then).
	refWaiters map[types.UID][]string
	// refusals are the debits refused because they exceeded the balance, with the message
	// saying so: refused once, refused for good, whatever the balance later.
	refusals map[types.UID]string

	dirty    bool // the status in the account is behind the books
	check    bool // the next write reads the sources of entries whose fate is unknown (Tidy)
	flushing bool // a writer goroutine runs for this account
	// writing: the writer's commit is under way; seen is the newest copy of the account seen
	// meanwhile (its own write, or somebody else's after it), seenRV its resourceVersion.
	writing   bool
	seenRV    string
	seen      *videogenv1alpha1.PointAccount
	lastWrite time.Time
}

// referenceKey is what a top-up's reference is compared by (docs/ledger.md, rule 6): two
// references that an accountant reads as one invoice number are one reference. It is the
// reference's NFKC case fold (Unicode's NFKC_Casefold, near enough), with
//   - every default-ignorable code point left out (a zero-width space or joiner, a byte-order
//     mark, a soft hyphen, a bidi control, a variation selector, a combining grapheme joiner:
//     invisible, so no one reading the reference can tell it is there; the schema refuses
//     them, but a top-up stored before that rule is still compared);
//   - NFKC, so a fullwidth "ＩＮＶ１" is "INV1", a precomposed ü is u and a combining
//     diaeresis, and a ligature its letters;
//   - case folded (Unicode full case folding, no language's special rules: ß is ss), so
//     "inv-1" is "INV-1" (nobody issues two invoices told apart by case);
//   - every dash (Unicode Pd: a hyphen, a non-breaking hyphen, an en or em dash, a fullwidth
//     hyphen-minus) and the minus sign read as "-";
//   - every space of any kind (Unicode Zs, as a no-break space copied from a PDF carries, and
//     the Braille blank) read as a space.
//
// What prints differently still counts: "INV 1", "INV1" and "INV-1" are three references, "O"
// and "0" two, "." and "-" two. The key is never stored (the books are rebuilt from the
// references themselves), so the rule may be changed; a change that makes two applied top-ups
// compare equal takes nothing back and refuses neither (an applied top-up is never asked
// again, see ApplyTopUp); a top-up not applied yet is compared by the new rule.
func referenceKey(t *videogenv1alpha1.PointTopUp) string {
	return referenceKeyOf(t.Spec.Reference)
}

// referenceKeyOf is referenceKey's rule; a test may swap it for an older one.
var referenceKeyOf = canonicalReference

func canonicalReference(ref string) string {
	visible := strings.Map(func(r rune) rune {
		if defaultIgnorable(r) {
			return -1
		}
		return r
	}, ref)
	// A Caser is not for two goroutines at once, and books of two namespaces compare at once.
	folded := norm.NFKC.String(cases.Fold().String(norm.NFKC.String(visible)))
	return strings.Map(func(r rune) rune {
		switch {
		case defaultIgnorable(r): // none left, unless folding made one
			return -1
		case unicode.Is(unicode.Pd, r) || r == '\u2212':
			return '-'
		case unicode.Is(unicode.Zs, r) || r == '\u2800': // the schema's spaces: Zs and the Braille blank
			return ' '
		}
		return r
	}, folded)
}

// defaultIgnorable reports whether r is one of Unicode's Default_Ignorable_Code_Points (format
// characters, variation selectors and the rest of Other_Default_Ignorable_Code_Point), which
// render as nothing. The Cf characters that do print (the Arabic number signs, the Egyptian
// hieroglyph format controls) are left out with them; no invoice number holds one.
func defaultIgnorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// appliedTopUp is the top-up a reference was applied (or queued) by.
type appliedTopUp struct {
	uid  types.UID
	name string
	// reference is its reference as written (the same as another's, or a look-alike of it).
	reference string
	// earlier: it was applied to an earlier account of the namespace, one deleted since.
	earlier bool
}

// load replaces the books with fresh ones, built from the account and its tasks. The lock and
// the writer's state stay.
func (b *book) load(f *book) {
	b.account, b.built, b.fenced, b.listRV = f.account, true, false, f.listRV
	b.tasks, b.frozen, b.holds, b.charging = f.tasks, f.frozen, f.holds, f.charging
	b.queued, b.queuedSeq, b.debits, b.fates = f.queued, f.queuedSeq, f.debits, f.fates
	b.topUpsShown, b.references, b.refusals, b.refWaiters = f.topUpsShown, f.references, f.refusals, f.refWaiters
	b.dirty = true
}

// creditOnItsWay reports whether a credit is queued (and so maybe written already: a write's
// entries stay queued until its answer comes) or a write is under way: the account may hold
// points the books do not count yet. Call it with b.mu held.
func (b *book) creditOnItsWay() bool {
	if b.writing {
		return true
	}
	for _, q := range b.queued {
		if q.Kind == videogenv1alpha1.JournalTopUp && q.Amount > 0 {
			return true
		}
	}
	return false
}

// enqueue queues a journal entry for the account's next write.
func (b *book) enqueue(j videogenv1alpha1.JournalEntry) {
	b.seq++
	b.queued[j.UID], b.queuedSeq[j.UID] = j, b.seq
}

// queueOrder lists the queued entries' UIDs in the order they were queued.
func (b *book) queueOrder() []types.UID {
	for uid := range b.queuedSeq {
		if _, ok := b.queued[uid]; !ok {
			delete(b.queuedSeq, uid) // written or taken back since
		}
	}
	uids := slices.Collect(maps.Keys(b.queued))
	slices.SortFunc(uids, func(x, y types.UID) int { return cmp.Compare(b.queuedSeq[x], b.queuedSeq[y]) })
	return uids
}

func newBook(namespace string) *book {
	return &book{
		namespace:   namespace,
		tasks:       map[string]*entry{},
		queued:      map[types.UID]videogenv1alpha1.JournalEntry{},
		queuedSeq:   map[types.UID]uint64{},
		fates:       map[types.UID]fate{},
		topUpsShown: map[types.UID]bool{},
		references:  map[string]appliedTopUp{},
		refusals:    map[types.UID]string{},
		refWaiters:  map[types.UID][]string{},
		wake:        make(chan struct{}, 1),
	}
}

// available is what new freezes and debits may take: credited − spent − frozen − queued debits.
func (b *book) available() int64 {
	if b.account == nil {
		return 0
	}
	return b.account.Status.Credited - b.account.Status.Spent - b.frozen - b.debits
}

// set moves e to s, keeping frozen and holds in step.
func (b *book) set(e *entry, s state) {
	if b.built && e.state != s {
		b.count(e, s) // not when books are (re)built: what they find was counted when decided
	}
	if e.state.holds() {
		b.frozen -= e.price
		b.holds--
	}
	if s.holds() {
		b.frozen += e.price
		b.holds++
		if !e.state.holds() {
			b.admittedSinceWrite = true
		}
	}
	if e.state == charging {
		b.charging--
	}
	if s == charging {
		b.charging++
	}
	if e.state != s {
		b.dirty = true
	}
	e.state = s
	if b.chargesDue() {
		select {
		case b.wake <- struct{}{}: // a writer waiting for its interval writes now
		default:
		}
	}
}

// chargesDue reports whether the account's next write need not wait for its interval: every
// task the account holds waits for that write to be charged, and no hold began since the last
// write. Waiting lets the charges of other tasks share a write (a burst's charges arrive while
// its tasks still come in, so they wait); here no other charge can come before one of these
// tasks' holds would have to end first, and waiting would only delay their success. At most
// one write between two the interval allows goes early (one that could not carry every charge,
// under the journal's size limit, is not followed by another at once). Only when a write
// happens depends on it, never what it carries.
func (b *book) chargesDue() bool {
	return b.charging > 0 && b.charging == b.holds && !b.admittedSinceWrite && !b.wroteEarly
}

// count adds e's move to s to videogen_points_moved_total, once per task: a freeze when its
// hold is decided, a refund when a hold ends without a charge, however it ends (its status says
// Refunded, it is deleted, or it leaves the books closed). A charge is counted as a deduction
// when its account write lands (landed), so a hold that ends with a charge queued counts nothing
// here. Over a run, freeze = deduct + refund + frozen (once nothing is pending or queued).
func (b *book) count(e *entry, s state) {
	switch {
	case (s == held || s == charging) && !e.frozenCounted:
		e.frozenCounted = true
		b.moved("freeze", e.price)
	case e.state == pending && s == settled && e.refunded && !e.frozenCounted:
		// One status write recorded its hold and its refund (a task that timed out before it
		// ran): the hold was decided, and ended.
		e.frozenCounted = true
		b.moved("freeze", e.price)
		b.moved("refund", e.price)
	case (e.state == held || e.state == charging) && !s.holds() && s != charged:
		// A hold found when the books were built is refunded here too: the process that
		// decided it counted its freeze.
		if q, ok := b.queued[e.uid]; !ok || q.Kind != videogenv1alpha1.JournalCharge {
			b.moved("refund", e.price)
		}
	}
}

func (b *book) moved(operation string, points int64) {
	pointsMoved.WithLabelValues(b.namespace, operation).Add(float64(points))
}

// drop takes a task out of the books: it is gone, or closed (which means settled), and its
// hold ends either way. A charge queued for it is still written: its work was done.
func (b *book) drop(name string) {
	e, ok := b.tasks[name]
	if !ok {
		return
	}
	if _, inJournal := b.journalEntry(e.uid); inJournal && b.fates[e.uid] == fateUnknown {
		b.fates[e.uid] = fateCheck // it may have closed Refunded: read it before forgetting
	}
	b.set(e, settled)
	delete(b.tasks, name)
}

// journalEntry returns the account's journal entry for uid, if any.
func (b *book) journalEntry(uid types.UID) (videogenv1alpha1.JournalEntry, bool) {
	if b.account == nil {
		return videogenv1alpha1.JournalEntry{}, false
	}
	for _, j := range b.account.Status.Journal {
		if j.UID == uid {
			return j, true
		}
	}
	return videogenv1alpha1.JournalEntry{}, false
}

// holdsCredit reports whether the journal or the queue holds a top-up's credit (or debit).
func (b *book) holdsCredit(uid types.UID) bool {
	if q, ok := b.queued[uid]; ok && q.Kind == videogenv1alpha1.JournalTopUp {
		return true
	}
	j, ok := b.journalEntry(uid)
	return ok && j.Kind == videogenv1alpha1.JournalTopUp
}

// evidence is what a copy of a task says about its points.
type evidence struct {
	settledAs videogenv1alpha1.ChargeState // Deducted, Refunded, or "" with ended
	ended     bool                         // terminal (or closed): it holds nothing any more
	admitted  bool                         // it shows an admission (signed create or Frozen)
	price     int64
}

// newer reports whether resourceVersion a is newer than b ("" is older than anything).
func newer(a, b string) bool {
	if b == "" {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// observe brings a task's copy into the books: a copy this ledger wrote, or an informer event.
// A copy older than what the books know is ignored. It returns the task's entry (nil if the
// copy was stale for a task not in the books).
func (b *book) observe(t *videogenv1alpha1.VideoTask, ev evidence) *entry {
	e := b.tasks[t.Name]
	if e != nil && e.uid != "" && e.uid != t.UID {
		if !newer(t.ResourceVersion, e.rv) {
			return nil // an old copy of an earlier task of this name
		}
		b.drop(t.Name) // the earlier task of this name is gone
		e = nil
	}
	if e == nil {
		if !newer(t.ResourceVersion, b.listRV) {
			return nil // closed or deleted before the books were built
		}
		e = &entry{state: unadmitted}
		b.tasks[t.Name] = e
	} else if e.rv != "" && !newer(t.ResourceVersion, e.rv) {
		return e
	}
	if e.uid == "" && !e.createsTask(t) {
		// Another task has the name while a REST create of it is on its way: the entry stays
		// the create's, with its hold. If the create fails (AlreadyExists), CreateTask reads
		// that task and counts it then; if that task goes first, the create lands and is this.
		return nil
	}
	e.uid, e.rv = t.UID, t.ResourceVersion
	charge, inJournal := b.journalEntry(t.UID)

	switch {
	case ev.ended && ev.settledAs == videogenv1alpha1.ChargeDeducted && !inJournal && (e.state == held || e.state == charging):
		// Deducted, though the charge that comes before it is not in the journal: the status
		// was written by hand (the controller writes Deducted only after its charge landed;
		// only the manager's role may write task statuses). The task says it succeeded, so
		// it is charged from its hold, and the entry goes in the write after.
		if _, ok := b.queued[t.UID]; !ok {
			b.enqueue(videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalCharge, Name: t.Name, UID: t.UID,
				Amount: e.price, Result: t.Status.Result.DeepCopy()})
		}
		b.fates[t.UID] = fateDeducted
		b.set(e, charging)
	case ev.ended:
		if inJournal {
			b.fates[t.UID] = fateOfEndedCopy(t)
		}
		if q, ok := b.queued[t.UID]; ok && q.Kind == videogenv1alpha1.JournalCharge {
			// Refunded by an earlier manager's write that landed late: no charge after all.
			delete(b.queued, t.UID)
			if b.writing {
				// The write on its way may carry it: if it lands, the entry gives its points
				// back in the write after (landed forgets this fate otherwise).
				b.fates[t.UID] = fateOfEndedCopy(t)
			}
		}
		e.refunded = ev.settledAs == videogenv1alpha1.ChargeRefunded
		b.set(e, settled)
	case inJournal:
		b.set(e, charged)
		// After set: a price changed while the entry holds would unbalance frozen. What was
		// charged is the price: a task charged before any status said its cost (a fast backend:
		// accepted and done in one reconcile) shows none to a new manager.
		e.price = charge.Amount
	case ev.admitted:
		if e.state == pending && ev.price != e.price {
			// An admission at another price landed (an earlier manager's, priced before a
			// template's price changed): the task holds what its status says, and this
			// ledger's own write will conflict. Counted as any admission it did not make.
			b.set(e, unadmitted)
		}
		switch e.state {
		case pending:
			b.set(e, held)
		case held, charging, charged, settled:
			// already counted (or done: a settled task never holds again)
		default:
			// An admission this ledger did not count: counted now if the balance covers it.
			e.price = ev.price
			if b.account != nil && b.available() >= ev.price {
				b.set(e, held)
			} else {
				b.set(e, overdrawn)
			}
		}
	default:
		if e.state == pending && e.base != "" && newer(t.ResourceVersion, e.base) {
			b.set(e, unadmitted) // the status write that would admit it did not land
		}
	}
	return e
}

// fateOfEndedCopy is what an ended task's copy says of its charge's entry, or a read of the
// task when it says neither Deducted nor not charged.
func fateOfEndedCopy(t *videogenv1alpha1.VideoTask) fate {
	if f := fateOfSource(t); f != fateUnknown {
		return f
	}
	return fateCheck
}

// fateOf is what decides the journal entry j when the account is next written.
func (b *book) fateOf(j videogenv1alpha1.JournalEntry) fate {
	if j.Kind == videogenv1alpha1.JournalTopUp || j.Kind == videogenv1alpha1.JournalRefusal {
		if b.topUpsShown[j.UID] {
			return fateDeducted // its status shows it: the entry goes, the credit stays
		}
		return fateCheck
	}
	return b.fates[j.UID]
}
