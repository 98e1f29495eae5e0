// Package ledger is the one authority over points. It runs in the elected manager; the REST
// apiserver replicas ask it over HTTP (Handler, Client). docs/ledger.md is the argument, in full;
// this is its summary.
//
// The task is the hold. A freeze writes nothing of the PointAccount: the ledger counts the hold
// in memory, under the account's lock, and records it in the task itself: for the REST API it
// creates the VideoTask with a signed admission annotation (the create is the freeze); for a
// task made with kubectl, the VideoTask controller writes status.charge Frozen. A refund is the
// task's status saying Refunded, or the task being gone. Frozen and balance are sums over open
// tasks that the ledger keeps in memory and copies into the account's status about once a
// second (a write that carries the charge of every task the account holds, none of them come
// since the last write, goes at once: nothing would share it by waiting).
//
// The account is the purse. Credited and spent are its only counters. A charge (a succeeded
// task) and a top-up change them in one compare-and-swap together with a journal entry keyed
// by the source's UID (entries are written in the order queued, at most 512 KiB of journal a
// write); the entry is forgotten once the source's status shows it (the task Deducted, the
// top-up applied, or refused for a refusal's entry: a refusal written by hand over a credit
// is not believed) or the source is gone, and a charge whose task says Refunded
// after all gives its points back then. The status is the ledger's alone: every
// write carries absolute figures, its books' (the status it last wrote, with its queued entries
// applied), whatever the stored copy says, so a retry of a write that landed writes the same
// figures instead of counting twice, and an edit by anybody else is written back. A charge is
// in the account before the task says Succeeded, so a crash or a deletion cannot lose it, and
// the entry carries the result so that a new manager can finish the task. A Deducted status
// seen on a task the books hold without that entry (written by hand) is charged from the
// hold. A top-up's reference is unique in its namespace: the books remember the references of
// the top-ups applied to the account and to earlier accounts of the namespace (a top-up cannot
// be deleted unless refused), and refuse a second top-up with one (compared as an accountant
// reads an invoice number: NFKC, case folded, invisible characters left out, any dash read as
// "-" and any space as a space; see referenceKey). A credit is queued only for a top-up carrying
// FinalizerLedger and not being deleted, so one deleted while its credit is queued stays listed
// (Terminating) with its reference; the controller takes the finalizer off only a deleted top-up
// the books hold no credit of, or with its namespace. A debit beyond the balance waits while a
// credit made no later than it is still to be applied (top-ups count in the order they were
// made), then is refused with a journal entry of its own (no points), so a stale copy of it is
// never debited later.
//
// One authority. The books are rebuilt when a manager is elected: for each account a write of
// status.authority first (so that no write of an earlier manager still in flight can land),
// then the open tasks and top-ups read from the kube-apiserver, never from a cache, the leader
// Lease read before and after the fences (Config.Lease). A manager that sees another's
// authority, in an event or on a conflict, reads the Lease: if it still holds it in the term
// its books were built in, the fence is a deposed manager's and its next write puts its own
// name back; otherwise (or without a Lease) it stops deciding, and Start returns ErrFenced so
// that the manager exits, as on losing its Lease. The informer's
// events only bring what others did; a copy older than the books know is ignored.
// A hold is un-counted only when its write certainly failed: a create whose error may come
// before its commit (a timeout, a 500 or 503, a connection cut after it was sent) keeps it
// until a read says, and is answered in doubt. A hold the books did not count (a late create,
// a write that reported an error and landed) is counted when seen if the balance covers it,
// and refused before it runs otherwise. So 402 is
// exact whichever REST replica serves the request, and a balance read after a 202 shows it.
package ledger
