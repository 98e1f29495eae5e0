package reservations

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/ledger"
)

// These tests run the Admitter against a real Ledger over controller-runtime's fake client
// (compare-and-swap included); the envtest suites cover it against a kube-apiserver.

const ns = "acme"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func setup(t *testing.T, balance int64) (*Admitter, client.Client, *clock) {
	ad, c, clk, _ := setupCounting(t, balance)
	return ad, c, clk
}

// setupCounting also counts the account's status writes.
func setupCounting(t *testing.T, balance int64) (*Admitter, client.Client, *clock, *atomic.Int64) {
	t.Helper()
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
	acct.Status = videogenv1alpha1.PointAccountStatus{Balance: balance, Credited: balance}
	writes := &atomic.Int64{}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(acct).WithObjects(acct).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes.Add(1)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	clk := &clock{t: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}
	l := ledger.New(c, c, ledger.WithClock(clk.now))
	return New(Config{Ledger: l, Cache: c, Fresh: c, Holder: "r-test", Now: clk.now, CacheTTL: time.Nanosecond}), c, clk, writes
}

func status(t *testing.T, c client.Client) videogenv1alpha1.PointAccountStatus {
	t.Helper()
	acct := &videogenv1alpha1.PointAccount{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		t.Fatal(err)
	}
	if err := ledger.Check(&acct.Status); err != nil {
		t.Fatal(err)
	}
	return acct.Status
}

// settle waits for the ledger writes that Created and releases started.
func settle(t *testing.T, c client.Client, ok func(videogenv1alpha1.PointAccountStatus) bool) videogenv1alpha1.PointAccountStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := status(t, c)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("account never reached the expected state: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func admit(t *testing.T, ad *Admitter, task string, price int64) *Ticket {
	t.Helper()
	tk, err := ad.Admit(context.Background(), ns, task, price)
	if err != nil {
		t.Fatalf("admit %s: %v", task, err)
	}
	return tk
}

func TestOneReservationAdmitsManyTasksAndEachTaskGetsItsHold(t *testing.T) {
	ad, c, _, writes := setupCounting(t, 1000)
	first := admit(t, ad, "t0", 10)
	if st := status(t, c); st.Reserved != 80 || st.Balance != 920 || len(st.Reservations) != 1 {
		t.Fatalf("after the first admission: %+v, want one reservation of 8 tasks (80)", st)
	}
	first.Created()
	for i := 1; i < 40; i++ {
		admit(t, ad, fmt.Sprintf("t%d", i), 10).Created()
	}
	quiet(ad)
	st := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 40 })
	// 8, then 16, 32, 64 tasks' worth, each refill made ahead of need while a quarter was left.
	if len(st.Reservations) != 1 || st.Frozen-st.Reserved != 400 || st.Balance+st.Frozen != 1000 {
		t.Fatalf("forty tasks under one reservation: %+v", st)
	}
	if n := writes.Load(); n > 8 {
		t.Fatalf("%d writes for 40 tasks", n)
	}
}

// quiet waits until no refill is in flight.
func quiet(ad *Admitter) {
	for {
		busy := false
		ad.mu.Lock()
		for _, a := range ad.accounts {
			a.mu.Lock()
			busy = busy || a.refill != nil
			a.mu.Unlock()
		}
		ad.mu.Unlock()
		if !busy {
			time.Sleep(20 * time.Millisecond) // a refill started by the last admission
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAdmitRefusesExactlyWhatTheBalanceCannotCover(t *testing.T) {
	ad, c, _ := setup(t, 25)
	admit(t, ad, "a", 10).Created()
	admit(t, ad, "b", 10).Created()
	_, err := ad.Admit(context.Background(), ns, "c", 10)
	var short *ledger.InsufficientBalanceError
	if !errors.As(err, &short) || short.Available != 5 || short.Required != 10 {
		t.Fatalf("third admission = %v, want insufficient balance with 5 available", err)
	}
	// A cheaper task still fits the 5 left (reserved or not).
	admit(t, ad, "d", 5).Created()
	st := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 3 })
	if st.Balance != 0 || st.Reserved != 0 || st.Frozen != 25 {
		t.Fatalf("status = %+v", st)
	}
}

func TestRefusedGivesThePriceBackAndUnknownKeepsIt(t *testing.T) {
	ad, c, _ := setup(t, 20)
	admit(t, ad, "a", 10).Refused()
	admit(t, ad, "a", 10).Unknown() // may exist: its price stays reserved
	if _, err := ad.Admit(context.Background(), ns, "b", 20); err == nil {
		t.Fatal("admitted 20 while 10 of the 20 points may belong to a task")
	}
	admit(t, ad, "c", 10).Refused()
	// Idle: the whole reservation goes back, the uncertain price included (no task claimed it).
	ad.releaseIdle(0)
	st := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return len(st.Reservations) == 0 })
	if st.Balance != 20 || st.Frozen != 0 {
		t.Fatalf("after the release: %+v", st)
	}
}

func TestRequestsForOneTaskWaitForEachOther(t *testing.T) {
	ad, _, _ := setup(t, 1000)
	first := admit(t, ad, "same", 10)
	errc := make(chan error, 1)
	go func() {
		_, err := ad.Admit(context.Background(), ns, "same", 10)
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("second admission of the same task did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	first.Created()
	if err := <-errc; !errors.Is(err, ErrAdmitted) {
		t.Fatalf("second admission = %v, want ErrAdmitted", err)
	}
	// After a refused create the next request for the task is admitted normally.
	admit(t, ad, "other", 10).Refused()
	admit(t, ad, "other", 10).Created()
}

func TestAdmissionRenewsAfterTheFenceWindowAndStartsOverWhenExpired(t *testing.T) {
	ad, c, clk := setup(t, 1000)
	admit(t, ad, "a", 10).Created()
	renewed := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 1 }).Reservations[0].RenewedAt

	clk.add(11 * time.Second) // past the 10s fence window: renew before admitting
	admit(t, ad, "b", 10).Created()
	st := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 2 })
	if len(st.Reservations) != 1 || !st.Reservations[0].RenewedAt.After(renewed.Time) {
		t.Fatalf("not renewed: %+v", st.Reservations)
	}

	// The manager released it meanwhile (it saw no renewal for its TTL): a new one is made.
	l := ledger.New(c, c)
	if _, err := l.Do(context.Background(), ns, ledger.ReleaseReservation(st.Reservations[0].Name)); err != nil {
		t.Fatal(err)
	}
	clk.add(11 * time.Second)
	tk := admit(t, ad, "c", 10)
	if tk.Reservation == st.Reservations[0].Name {
		t.Fatalf("admitted under the released reservation %q", tk.Reservation)
	}
	tk.Created()
	st = settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 3 })
	if len(st.Reservations) != 1 || st.Balance+st.Frozen != 1000 {
		t.Fatalf("status = %+v", st)
	}
}

func TestSuspendedAccountIsRefusedEvenWithPointsReserved(t *testing.T) {
	ad, c, _ := setup(t, 1000)
	admit(t, ad, "a", 10).Created()
	settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 1 })
	acct := &videogenv1alpha1.PointAccount{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		t.Fatal(err)
	}
	acct.Spec.Suspended = true
	if err := c.Update(context.Background(), acct); err != nil {
		t.Fatal(err)
	}
	if _, err := ad.Admit(context.Background(), ns, "b", 10); !errors.Is(err, ledger.ErrAccountSuspended) {
		t.Fatalf("admission on a suspended account = %v", err)
	}
}

func TestRunReleasesIdleReservationsAndAllOnShutdown(t *testing.T) {
	ad, c, clk := setup(t, 1000)
	ad.cfg.IdleRelease = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ad.Run(ctx) }()
	admit(t, ad, "a", 10).Created()
	clk.add(time.Second) // idle
	settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool {
		return len(st.Reservations) == 0 && st.Balance == 990 && st.Frozen == 10
	})
	// One in use at shutdown: released on the way out.
	admit(t, ad, "b", 10).Created()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := status(t, c); len(st.Reservations) != 0 || st.Balance != 980 {
		t.Fatalf("after shutdown: %+v", st)
	}
}

func TestTasksCreatedWithinTheLingerShareOneWrite(t *testing.T) {
	ad, c, _, writes := setupCounting(t, 10000)
	tickets := make([]*Ticket, 20)
	for i := range tickets {
		tickets[i] = admit(t, ad, fmt.Sprintf("t%d", i), 10)
	}
	quiet(ad)
	before := writes.Load()
	for _, tk := range tickets {
		tk.Created()
	}
	settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 20 })
	if n := writes.Load() - before; n != 1 {
		t.Fatalf("%d writes for 20 created tasks' holds, want 1", n)
	}
}

func TestAReplicaShortOfPointsRecallsTheOthersReservations(t *testing.T) {
	a, c, clk := setup(t, 200)
	// A second replica on the same account, with a ledger of its own.
	b := New(Config{Ledger: ledger.New(c, c, ledger.WithClock(clk.now)), Cache: c, Fresh: c, Holder: "r-other", Now: clk.now, CacheTTL: time.Nanosecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Run(ctx) }()

	admit(t, a, "a1", 40).Created() // a reserves half the balance: 100
	admit(t, b, "b1", 40).Created() // b: half of the other 100 is not enough, so 50
	admit(t, b, "b2", 40).Created() // b: 30 more (what it needs)
	settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 3 })
	if st := status(t, c); st.Balance != 20 || st.Reserved != 60 {
		t.Fatalf("status = %+v, want 20 in the balance and a's 60 unused", st)
	}
	// b needs 40: the balance has 20, a holds 60 it is not using. b recalls, a returns them.
	start := time.Now()
	tk, err := b.Admit(context.Background(), ns, "b3", 40)
	if err != nil {
		t.Fatalf("admission that a recall could satisfy = %v", err)
	}
	tk.Created()
	t.Logf("admitted after %s", time.Since(start).Round(time.Millisecond))
	st := settle(t, c, func(st videogenv1alpha1.PointAccountStatus) bool { return st.HoldCount() == 4 })
	if st.ReservationsRecalledAt == nil || st.Frozen-st.Reserved != 160 || st.Balance+st.Frozen != 200 {
		t.Fatalf("status = %+v", st)
	}
	// One task's worth is left in all (40): a fifth fits, a sixth is refused at once.
	admit(t, b, "b4", 40).Created()
	if _, err := b.Admit(context.Background(), ns, "b5", 40); err == nil {
		t.Fatal("admitted more than the account holds")
	}
}

func TestMoveLingerGrowsWithTheAccountsHolds(t *testing.T) {
	base := 100 * time.Millisecond
	for _, c := range []struct {
		holds int
		want  time.Duration
	}{
		{0, base}, {250, base}, {500, 2 * base}, {1000, 4 * base}, {1250, maxLinger}, {100000, maxLinger},
	} {
		if got := moveLinger(base, c.holds); got != c.want {
			t.Errorf("moveLinger(%v, %d holds) = %v, want %v", base, c.holds, got, c.want)
		}
	}
	// A configured linger above the cap is kept as it is.
	if got := moveLinger(time.Second, 0); got != time.Second {
		t.Errorf("moveLinger(1s, 0 holds) = %v, want 1s", got)
	}
}
