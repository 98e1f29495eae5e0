// Package ledger is the only code that changes point balances.
//
// Every change is a compare-and-swap (an update carrying the resourceVersion it read) of one
// PointAccount's status. A change is a batch of operations (freeze, settle, top-up, and the
// "forget" operations that trim records), applied in order to a copy of the status and written
// at once; on a conflict the batch is recomputed from a fresh read and written again. So either
// every operation of a batch takes effect or none does, and each one is decided against the
// balance it will actually change.
//
// Why it is exactly-once per task:
//   - Freeze is keyed by task name. A second Freeze for a task that holds points is a no-op, and
//     a Freeze for a task whose settlement is still recorded is refused, so a retried or stale
//     reconcile cannot charge twice.
//   - Settle moves a hold to spent or back to balance and, in the same write, records the
//     outcome in status.settlements. A retried Settle finds that record and returns the first
//     outcome without moving points again. The VideoTask controller decides the outcome in the
//     task's own status write (its terminal phase and charge) and settles right after; the
//     hold left in the account marks a settle not yet applied, which the PointAccount
//     controller applies as the task's status says if the manager died in between.
//   - A settlement record is forgotten only after the task's own status shows it (terminal
//     phase), or the task is gone. A task whose terminal status was observed never settles
//     again, so the record is no longer needed.
//   - A repeat (a freeze whose hold is there, a settle whose record is there) is decided by a
//     record that only that task's own operations remove, so it stands when found on an older
//     copy of the account; a refusal, or a no-op that found nothing, is decided on a fresh read.
//   - Reserve moves points from the balance into a named reservation, a hold that belongs to a
//     REST apiserver replica rather than a task. FreezeFrom moves a task's price from the
//     reservation it was admitted under into the task's own hold; it is keyed by task like
//     Freeze (and falls back to Freeze when the reservation cannot cover it), so the apiserver
//     and the controller may both try it. ReleaseReservation returns what is left.
//   - Top-ups are the same: ApplyTopUp records the PointTopUp's UID with the credit, and the
//     record is forgotten only after the PointTopUp's status says it was applied.
//
// Why the invariant holds: every operation changes balance, frozen, spent and credited by amounts
// that sum to the same change on both sides of credited = balance + frozen + spent, and changes
// frozen and the holds (task holds and reservations) together. Check verifies both before every write and refuses to
// write a status that breaks them. A crash can only lose a write that did not happen, never half
// of one, because each write is one object update.
//
// Why batching: a compare-and-swap on one busy object collapses under concurrency (most attempts
// conflict). A Ledger queues the operations that arrive for an account while a write is in
// flight and applies them together in the next one, answering each caller from its own result,
// as Kubernetes' ResourceQuota admission batches quota updates. Operations nobody waits on
// (StartWithin: settles whose outcome the task's status already records) wait up to a delay
// for the account's next write.
package ledger
