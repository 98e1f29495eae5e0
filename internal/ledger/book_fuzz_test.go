package ledger

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// FuzzBooksKeepTheirSums drives one account's books through random sequences of what happens
// to them (admissions, copies of tasks arriving in any order, with any evidence, charges
// landing, deletions) and checks after every step that frozen, holds and charging are the sums
// over the tasks, and that no admission ever took the balance below zero.
func FuzzBooksKeepTheirSums(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Add([]byte{1, 17, 33, 2, 18, 3, 4, 20, 5, 6, 7})
	// Charged, dropped, admitted again at 10 under the same UID, then a copy in the journal
	// showing 30: the price once changed while the entry held, and frozen went to -20.
	f.Add([]byte{0, 9, 5, 9, 6, 9, 7, 9, 0, 9, 1, 15})
	f.Fuzz(func(t *testing.T, ops []byte) {
		b := newBook("fuzz")
		b.built = true
		b.account = &videogenv1alpha1.PointAccount{Status: videogenv1alpha1.PointAccountStatus{Credited: 100}}
		rv := 1
		next := func() string { rv++; return strconv.Itoa(rv) }
		uids := map[int]types.UID{}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, int(ops[i+1])
			name := "t" + strconv.Itoa(arg%6)
			price := int64(arg%4) * 10
			if uids[arg%6] == "" {
				uids[arg%6] = types.UID(name + "-" + strconv.Itoa(rv))
			}
			uid := uids[arg%6]
			task := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
			switch op {
			case 0: // an admission the books decide (CreateTask, Admit)
				if e := b.tasks[name]; e == nil && b.available() >= price {
					e = &entry{price: price, uid: uid}
					b.tasks[name] = e
					b.set(e, pending)
				}
			case 1, 2: // a copy arrives showing an admission (a signed create, or Frozen)
				task.ResourceVersion = next()
				b.observe(task, evidence{admitted: true, price: price})
			case 3: // a copy arrives that shows no admission
				task.ResourceVersion = next()
				b.observe(task, evidence{})
			case 4: // a copy arrives that shows the task ended
				task.ResourceVersion = next()
				charge := videogenv1alpha1.ChargeRefunded
				if arg%2 == 0 {
					charge = videogenv1alpha1.ChargeDeducted
				}
				b.observe(task, evidence{ended: true, settledAs: charge})
			case 5: // success: the charge waits for the account's write
				if e := b.tasks[name]; e != nil && (e.state == held || e.state == pending) {
					b.set(e, charging)
					b.queued[e.uid] = videogenv1alpha1.JournalEntry{Kind: videogenv1alpha1.JournalCharge, Name: name, UID: e.uid, Amount: e.price}
				}
			case 6: // the account write lands: charges move from frozen to spent
				for id, q := range b.queued {
					if e := b.tasks[q.Name]; e != nil && e.uid == id && e.state == charging {
						b.account.Status.Spent += q.Amount
						b.account.Status.Journal = append(b.account.Status.Journal, q)
						b.set(e, charged)
					}
					delete(b.queued, id)
				}
			case 7: // deleted, or closed
				b.drop(name)
				delete(uids, arg%6)
			}
			var frozen int64
			var holds, charges int
			for _, e := range b.tasks {
				if e.state.holds() {
					frozen += e.price
					holds++
				}
				if e.state == charging {
					charges++
				}
			}
			if frozen != b.frozen || holds != b.holds || charges != b.charging {
				t.Fatalf("after op %d on %s: frozen %d holds %d charging %d, the books say %d, %d and %d",
					op, name, frozen, holds, charges, b.frozen, b.holds, b.charging)
			}
			if b.available() < 0 {
				t.Fatalf("after op %d on %s: available %d < 0 (credited 100, spent %d, frozen %d)", op, name, b.available(), b.account.Status.Spent, b.frozen)
			}
		}
	})
}
