// Package chaos runs the whole system as real processes (the local stack, with two REST
// apiserver replicas and a manager whose cache lags behind the kube-apiserver) against a
// fault-injecting generation backend, submits many tasks with replayed Idempotency-Keys (each
// send through either replica) and payment webhooks while it SIGKILLs and restarts the manager
// and the replicas and takes the backend down, and then checks that nothing was lost or done
// twice: every task ended, every account balances to the point (spent is the cost of its
// succeeded tasks), every key made one task, every ended task was announced by a signed
// webhook, and every payment event was stored once.
//
// The default is a short run for `go test ./...`; `make test-chaos` with CHAOS_TASKS and
// CHAOS_DURATION runs a long one (e.g. CHAOS_TASKS=3000 CHAOS_DURATION=10m). CHAOS_WATCH_DELAY
// sets how late the manager's cache sees every change (default 300ms; 0: no lag).
package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/stacktest"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// settings of one run; CHAOS_TASKS and CHAOS_DURATION scale it.
type settings struct {
	tasks         int           // tasks submitted (REST, plus a few kubectl-style creates)
	duration      time.Duration // how long the faults go on
	accounts      int
	submitters    int // goroutines submitting
	payments      int // distinct payment events
	copies        int // deliveries of each payment event
	taskTimeout   time.Duration
	settleTimeout time.Duration
	watchDelay    time.Duration // how late the manager's cache sees every change
}

func loadSettings(t *testing.T) settings {
	s := settings{tasks: 240, duration: 60 * time.Second, accounts: 3, submitters: 12, copies: 3,
		taskTimeout: 8 * time.Second, watchDelay: 300 * time.Millisecond}
	if v := os.Getenv("CHAOS_WATCH_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("CHAOS_WATCH_DELAY=%q: want a duration", v)
		}
		s.watchDelay = d
	}
	if v := os.Getenv("CHAOS_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_TASKS=%q: want a positive number", v)
		}
		s.tasks = n
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("CHAOS_DURATION=%q: want a duration of at least 10s", v)
		}
		s.duration = d
	}
	s.payments = max(10, s.tasks/15)
	s.settleTimeout = 2*time.Minute + time.Duration(s.tasks)*20*time.Millisecond
	return s
}

// job is one task-creating request, sent several times with the same Idempotency-Key.
type job struct {
	account *account
	path    string
	key     string
	body    []byte

	mu        sync.Mutex
	ids       []string // the id of every 2xx answer
	abandoned bool
}

type account struct {
	name, key string
}

// counters for the summary line.
type counters struct {
	managerKills, apiserverKills, backendOutages, backendRestarts atomic.Int64
	sends, replays, retries, inUse, directTasks                   atomic.Int64
}

type run struct {
	t        *testing.T
	set      settings
	stack    *localstack.Stack
	backend  *faultyBackend
	hooks    *hookReceiver
	payments *stripeSender
	http     *http.Client
	accounts []*account
	jobs     []*job
	direct   []client.ObjectKey // tasks created kubectl-style
	sendBy   time.Time          // requests are retried until then
	count    counters

	mu       sync.Mutex
	failures []string
}

func (r *run) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test runs the whole stack; skipped with -short")
	}
	set := loadSettings(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+set.duration+set.settleTimeout)
	defer cancel()
	began := time.Now()

	binDir := buildBinaries(t, "manager", "apiserver")
	backend, err := startFaultyBackend()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(backend.Close)
	hooks := startHookReceiver()
	t.Cleanup(hooks.srv.Close)

	stack, err := localstack.Start(ctx, localstack.Config{
		DataDir: t.TempDir(), BinDir: binDir, APIAddress: freeAddr(t), MoreAPIAddresses: []string{freeAddr(t)},
		Backend: backend.URL(),
		ManagerArgs: []string{
			"--task-timeout=" + set.taskTimeout.String(),
			"--debug-watch-delay=" + set.watchDelay.String(),
			"--webhook-retry-schedule=500ms,1s,1s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s",
			"--webhook-timeout=5s",
			"--max-concurrent-tasks=16",
		},
		Log: testLog{t},
	})
	if err != nil {
		t.Fatalf("starting the local stack: %v", err)
	}
	t.Cleanup(stack.Stop)
	t.Logf("stack up after %s (logs in %s)", time.Since(began).Round(time.Second), filepath.Dir(stack.Kubeconfig)+"/logs")

	r := &run{t: t, set: set, stack: stack, backend: backend, hooks: hooks, http: &http.Client{Timeout: 20 * time.Second}}
	r.setUp(ctx)

	chaosEnd := time.Now().Add(set.duration)
	r.sendBy = chaosEnd.Add(60 * time.Second)
	var traffic sync.WaitGroup
	traffic.Add(2)
	go func() { defer traffic.Done(); r.submitAll(ctx, chaosEnd) }()
	go func() { defer traffic.Done(); r.sendPayments(ctx, chaosEnd) }()
	outagesDone := make(chan struct{})
	go func() { defer close(outagesDone); r.backendOutages(ctx, chaosEnd) }()
	r.killLoop(ctx, chaosEnd)
	<-outagesDone
	r.heal()
	t.Logf("faults stopped after %s; waiting for the clients", set.duration)
	traffic.Wait()

	t.Logf("clients done; letting the system settle (at most %s)", set.settleTimeout)
	settled := r.settle(ctx, set.settleTimeout)
	r.verify(ctx, settled)

	r.mu.Lock()
	failures := r.failures
	r.mu.Unlock()
	summary := r.summary(ctx, time.Since(began))
	t.Log(summary)
	fmt.Println(summary)
	if len(failures) > 0 {
		sort.Strings(failures)
		if len(failures) > 40 {
			failures = append(failures[:40], fmt.Sprintf("… and %d more", len(failures)-40))
		}
		t.Fatalf("%d invariant violations (logs in %s):\n  %s", len(r.failures), filepath.Dir(stack.Kubeconfig)+"/logs",
			strings.Join(failures, "\n  "))
	}
}

// setUp makes the accounts, their keys and webhook secrets, the Stripe connector secret, and
// the submission plan.
func (r *run) setUp(ctx context.Context) {
	t := r.t
	k := r.stack.Client
	const credit = 1_000_000
	for i := range r.set.accounts {
		a := &account{name: fmt.Sprintf("chaos-%d", i+1)}
		must(t, k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.name}}))
		must(t, k.Create(ctx, &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a.name, Name: videogenv1alpha1.PointAccountName}}))
		must(t, k.Create(ctx, &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: a.name, Name: "chaos-credit"},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: credit, Reference: "CHAOS-1"}}))
		key, _, err := apikeys.Issue(ctx, k, localstack.SystemNamespace, a.name, "chaos test key")
		must(t, err)
		a.key = key
		r.accounts = append(r.accounts, a)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, a := range r.accounts {
		for {
			status, body, err := r.call(ctx, http.MethodGet, "/v1/balance", a.key, nil)
			var b struct{ Credited int64 }
			if err == nil && status == http.StatusOK && json.Unmarshal(body, &b) == nil && b.Credited == credit {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("account %s was not credited within 60s: %d %s %v", a.name, status, body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		status, body, err := r.call(ctx, http.MethodGet, "/v1/webhook-secret", a.key, nil)
		var sec struct{ Secret string }
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &sec) != nil {
			t.Fatalf("webhook secret of %s: %d %s %v", a.name, status, body, err)
		}
		must(t, r.hooks.trust(a.name, sec.Secret))
	}

	const whsec = "whsec_chaos_stripe_secret"
	must(t, k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: localstack.SystemNamespace, Name: "stripe-webhook-chaos",
		Labels: map[string]string{"videogen.dev/webhook-connector": "stripe"}}, StringData: map[string]string{"secret": whsec}}))
	r.payments = &stripeSender{apiURL: r.stack.APIURL, secret: whsec, client: r.http, acks: map[string][]bool{}}
	// The apiserver learns the connector secret through its cache: wait for a first event.
	for warm := time.Now().Add(60 * time.Second); ; {
		err := r.payments.deliver(ctx, "evt_chaos_warmup", warm)
		if err == nil {
			break
		}
		if time.Now().After(warm) {
			t.Fatalf("warming up the Stripe connector: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	demo := r.stack.Demo
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range r.set.tasks {
		a := r.accounts[i%len(r.accounts)]
		hook := r.hooks.url(a.name)
		var path string
		var body map[string]any
		switch rand.IntN(4) {
		case 0:
			path, body = "/v1/videos/short", map[string]any{"template_id": demo.ShortTemplate, "face": demo.FaceURL, "webhook_url": hook}
		case 1:
			path, body = "/v1/videos/template", map[string]any{"template_id": demo.TemplateTemplate,
				"duration": []int{2, 5, 10}[rand.IntN(3)], "webhook_url": hook}
		case 2:
			path, body = "/v1/images/pose", map[string]any{"template_id": demo.PoseTemplate, "face": demo.FaceURL, "webhook_url": hook}
		default:
			path, body = "/v1/videos/eraser", map[string]any{"video": demo.VideoURL, "webhook_url": hook}
		}
		raw, err := json.Marshal(body)
		must(t, err)
		r.jobs = append(r.jobs, &job{account: a, path: path, key: fmt.Sprintf("chaos-%s-%d", run, i), body: raw})
	}
}

// submitAll paces the jobs over the fault window from many goroutines. One job in four is
// sent twice at once, and one in four is replayed later, after its first answer.
func (r *run) submitAll(ctx context.Context, until time.Time) {
	queue := make(chan *job)
	var wg sync.WaitGroup
	for range r.set.submitters {
		wg.Go(func() {
			for j := range queue {
				if rand.IntN(4) == 0 {
					r.count.replays.Add(1)
					wg.Go(func() { r.send(ctx, j) })
				}
				r.send(ctx, j)
				if rand.IntN(4) == 0 {
					r.count.replays.Add(1)
					delay := time.Duration(1+rand.IntN(15)) * time.Second
					wg.Go(func() {
						if sleep(ctx, delay) == nil {
							r.send(ctx, j)
						}
					})
				}
				// One task in twenty is also created kubectl-style, with its own short timeout.
				if rand.IntN(20) == 0 {
					r.createDirect(ctx, j.account)
				}
			}
		})
	}
	interval := time.Until(until) / time.Duration(len(r.jobs))
	for _, j := range r.jobs {
		select {
		case queue <- j:
		case <-ctx.Done():
		}
		_ = sleep(ctx, interval)
	}
	close(queue)
	wg.Wait()
}

// send posts a job until it gets a 2xx, retrying what a careful client retries.
func (r *run) send(ctx context.Context, j *job) {
	for attempt := 0; ; attempt++ {
		r.count.sends.Add(1)
		status, body, err := r.call(ctx, http.MethodPost, j.path, j.account.key, j.body, "Idempotency-Key", j.key)
		switch {
		case err == nil && (status == http.StatusOK || status == http.StatusAccepted):
			var task struct{ ID string }
			if json.Unmarshal(body, &task) != nil || task.ID == "" {
				r.fail("key %s: %d without a task id: %s", j.key, status, body)
				return
			}
			j.mu.Lock()
			j.ids = append(j.ids, task.ID)
			j.mu.Unlock()
			return
		case err == nil && status == http.StatusConflict:
			r.count.inUse.Add(1)
		case err == nil && status < 500 && status != http.StatusTooManyRequests:
			r.fail("key %s: POST %s answered %d: %s", j.key, j.path, status, body)
			return
		}
		if time.Now().After(r.sendBy) || ctx.Err() != nil {
			j.mu.Lock()
			j.abandoned = true
			j.mu.Unlock()
			r.fail("key %s: no 2xx before the deadline (last: %d %s %v)", j.key, status, body, err)
			return
		}
		r.count.retries.Add(1)
		_ = sleep(ctx, backoff(attempt))
	}
}

// createDirect creates a VideoTask as kubectl would, with a short spec.timeout.
func (r *run) createDirect(ctx context.Context, a *account) {
	n := r.count.directTasks.Add(1)
	task := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.name, Name: fmt.Sprintf("chaos-direct-%d", n)},
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityShort, TemplateRef: r.stack.Demo.ShortTemplate,
			Inputs:     videogenv1alpha1.TaskInputs{FaceImageURL: r.stack.Demo.FaceURL},
			WebhookURL: r.hooks.url(a.name), Timeout: &metav1.Duration{Duration: 3 * time.Second}},
	}
	if err := r.stack.Client.Create(ctx, task); err != nil && !apierrors.IsAlreadyExists(err) {
		r.fail("creating %s/%s: %v", a.name, task.Name, err)
		return
	}
	r.mu.Lock()
	r.direct = append(r.direct, client.ObjectKeyFromObject(task))
	r.mu.Unlock()
}

// sendPayments delivers each payment event `copies` times at once, at a random moment.
func (r *run) sendPayments(ctx context.Context, until time.Time) {
	var wg sync.WaitGroup
	for i := range r.set.payments {
		id := fmt.Sprintf("evt_chaos_%d_%d", time.Now().UnixNano(), i)
		at := time.Duration(rand.Int64N(int64(time.Until(until))))
		wg.Go(func() {
			if sleep(ctx, at) != nil {
				return
			}
			var copies sync.WaitGroup
			for range r.set.copies {
				copies.Go(func() {
					if err := r.payments.deliver(ctx, id, r.sendBy); err != nil {
						r.fail("%v", err)
					}
				})
			}
			copies.Wait()
		})
	}
	wg.Wait()
}

// killLoop SIGKILLs the manager, an apiserver replica or both at random moments and restarts
// them after a random pause. The stack's process control is used from this goroutine only.
func (r *run) killLoop(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil {
		_ = sleep(ctx, time.Duration(2000+rand.IntN(4000))*time.Millisecond)
		replica := []string{"apiserver", "apiserver-2"}[rand.IntN(2)]
		var victims []string
		switch rand.IntN(5) {
		case 0, 1:
			victims = []string{"manager"}
		case 2, 3:
			victims = []string{replica}
		default:
			victims = []string{"manager", replica}
		}
		for _, v := range victims {
			if err := r.stack.Kill(v); err != nil {
				r.t.Errorf("killing %s: %v", v, err)
				return
			}
			if v == "manager" {
				r.count.managerKills.Add(1)
			} else {
				r.count.apiserverKills.Add(1)
			}
		}
		_ = sleep(ctx, time.Duration(200+rand.IntN(2500))*time.Millisecond)
		for _, v := range victims {
			if err := r.stack.Restart(v); err != nil {
				r.t.Errorf("restarting %s: %v", v, err)
				return
			}
		}
	}
}

// backendOutages takes the backend down now and then: 503 busy, or no listener at all, and
// then half the time back as a restarted worker that forgot every stage it ran.
func (r *run) backendOutages(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil {
		_ = sleep(ctx, time.Duration(4000+rand.IntN(8000))*time.Millisecond)
		down := time.Duration(1000+rand.IntN(5000)) * time.Millisecond
		r.count.backendOutages.Add(1)
		if rand.IntN(2) == 0 {
			r.backend.busy.Store(true)
			_ = sleep(ctx, down)
			r.backend.busy.Store(false)
			continue
		}
		r.backend.closeListener()
		_ = sleep(ctx, down)
		if rand.IntN(2) == 0 {
			r.backend.forget()
			r.count.backendRestarts.Add(1)
		}
		if err := r.backend.reopen(); err != nil {
			r.t.Errorf("%v", err)
			return
		}
	}
}

// heal makes sure every component runs again once the faults stop.
func (r *run) heal() {
	for _, name := range []string{"manager", "apiserver", "apiserver-2"} {
		if !r.stack.Running(name) {
			if err := r.stack.Restart(name); err != nil {
				r.t.Fatalf("restarting %s: %v", name, err)
			}
		}
	}
	r.backend.busy.Store(false)
}

// settle waits until every task ended and closed, every hold was settled and every ended
// task's webhook was delivered, or the timeout passes. It reports whether that happened.
func (r *run) settle(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	var why string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		why = r.unsettled(ctx)
		if why == "" {
			return true
		}
		_ = sleep(ctx, time.Second)
	}
	r.fail("the system did not settle within %s: %s", timeout, why)
	return false
}

func (r *run) unsettled(ctx context.Context) string {
	for _, a := range r.accounts {
		var tasks videogenv1alpha1.VideoTaskList
		if err := r.stack.Client.List(ctx, &tasks, client.InNamespace(a.name)); err != nil {
			return err.Error()
		}
		for _, task := range tasks.Items {
			if !terminal(&task) {
				return fmt.Sprintf("task %s/%s is %s", a.name, task.Name, task.Status.Phase)
			}
			if wh := task.Status.Webhook; task.Spec.WebhookURL != "" && (wh == nil || wh.State != videogenv1alpha1.WebhookDelivered) {
				return fmt.Sprintf("task %s/%s: webhook not delivered yet (%+v)", a.name, task.Name, wh)
			}
			if !task.Status.Closed {
				return fmt.Sprintf("task %s/%s is not closed yet (charge %q)", a.name, task.Name, task.Status.Charge)
			}
		}
		var acct videogenv1alpha1.PointAccount
		if err := r.stack.Client.Get(ctx, client.ObjectKey{Namespace: a.name, Name: videogenv1alpha1.PointAccountName}, &acct); err != nil {
			return err.Error()
		}
		if acct.Status.Frozen != 0 {
			return fmt.Sprintf("account %s still has %d points frozen in %d holds", a.name, acct.Status.Frozen, acct.Status.Holds)
		}
		if n := len(acct.Status.Journal); n != 0 {
			return fmt.Sprintf("account %s still has %d journal entries", a.name, n)
		}
	}
	return ""
}

func terminal(t *videogenv1alpha1.VideoTask) bool {
	return t.Status.Phase == videogenv1alpha1.TaskSucceeded || t.Status.Phase == videogenv1alpha1.TaskFailed
}

// verify checks the invariants on the settled system.
func (r *run) verify(ctx context.Context, settled bool) {
	// Which task each key's answers named.
	named := map[string]*job{} // account/task id → job
	for _, j := range r.jobs {
		j.mu.Lock()
		ids, abandoned := j.ids, j.abandoned
		j.mu.Unlock()
		for _, id := range ids {
			if id != ids[0] {
				r.fail("key %s: 2xx answers named different tasks: %v", j.key, ids)
				break
			}
		}
		if len(ids) > 0 {
			named[j.account.name+"/"+ids[0]] = j
		} else if !abandoned {
			r.fail("key %s: never answered with a task", j.key)
		}
	}
	direct := map[string]bool{}
	for _, k := range r.direct {
		direct[k.Namespace+"/"+k.Name] = true
	}

	for _, a := range r.accounts {
		var tasks videogenv1alpha1.VideoTaskList
		if err := r.stack.Client.List(ctx, &tasks, client.InNamespace(a.name)); err != nil {
			r.fail("listing the tasks of %s: %v", a.name, err)
			continue
		}
		var spent int64
		seen := map[string]bool{}
		for _, task := range tasks.Items {
			id := a.name + "/" + task.Name
			seen[id] = true
			if named[id] == nil && !direct[id] {
				r.fail("task %s exists but no 2xx answer named it (a key made a second task, or a lost one)", id)
			}
			if !terminal(&task) {
				r.fail("task %s is not terminal: %s", id, task.Status.Phase)
				continue
			}
			switch {
			case task.Status.Phase == videogenv1alpha1.TaskSucceeded && task.Status.Charge != videogenv1alpha1.ChargeDeducted:
				r.fail("task %s succeeded with charge %q", id, task.Status.Charge)
			case task.Status.Phase == videogenv1alpha1.TaskFailed && task.Status.Cost != nil && task.Status.Charge != videogenv1alpha1.ChargeRefunded:
				r.fail("task %s failed with charge %q (error %+v)", id, task.Status.Charge, task.Status.Error)
			}
			if !task.Status.Closed {
				r.fail("task %s ended but is not closed (status.closed), so the manager would keep watching it", id)
			}
			if task.Status.Phase == videogenv1alpha1.TaskSucceeded && task.Status.Cost != nil {
				spent += *task.Status.Cost
			}
			if e := task.Status.Error; e != nil && e.Code == "insufficient_balance" {
				r.fail("task %s/%s was refused for its balance, on an account of a million points", a.name, task.Name)
			}
			r.verifyWebhook(a.name, &task)
		}
		for id, j := range named {
			if strings.HasPrefix(id, a.name+"/") && !seen[id] {
				r.fail("key %s: answered with task %s, which does not exist", j.key, id)
			}
		}
		var acct videogenv1alpha1.PointAccount
		if err := r.stack.Client.Get(ctx, client.ObjectKey{Namespace: a.name, Name: videogenv1alpha1.PointAccountName}, &acct); err != nil {
			r.fail("reading the account %s: %v", a.name, err)
			continue
		}
		st := acct.Status
		if len(st.Journal) != 0 {
			r.fail("account %s: %d journal entries left after everything settled", a.name, len(st.Journal))
		}
		if st.Credited != st.Balance+st.Frozen+st.Spent {
			r.fail("account %s: credited %d != balance %d + frozen %d + spent %d", a.name, st.Credited, st.Balance, st.Frozen, st.Spent)
		}
		if st.Frozen != 0 {
			r.fail("account %s: %d points still frozen (%d holds)", a.name, st.Frozen, st.Holds)
		}
		if st.Spent != spent {
			r.fail("account %s: spent %d, but its succeeded tasks cost %d", a.name, st.Spent, spent)
		}
	}

	// Payment events: each delivered `copies` times, stored once.
	var events videogenv1alpha1.PaymentEventList
	if err := r.stack.Client.List(ctx, &events, client.InNamespace(localstack.SystemNamespace)); err != nil {
		r.fail("listing payment events: %v", err)
		return
	}
	stored := map[string]int{}
	for _, e := range events.Items {
		stored[e.Spec.MerchantEventID]++
	}
	r.payments.mu.Lock()
	defer r.payments.mu.Unlock()
	for id, acks := range r.payments.acks {
		if stored[id] != 1 {
			r.fail("payment event %s: %d acknowledged deliveries made %d PaymentEvents", id, len(acks), stored[id])
		}
		fresh := 0
		for _, dup := range acks {
			if !dup {
				fresh++
			}
		}
		if fresh > 1 {
			r.fail("payment event %s: %d deliveries were acknowledged as new", id, fresh)
		}
	}
	if len(stored) != len(r.payments.acks) {
		r.fail("%d payment events were delivered but %d merchant event ids are stored", len(r.payments.acks), len(stored))
	}
	_ = settled
}

func (r *run) verifyWebhook(acct string, task *videogenv1alpha1.VideoTask) {
	if task.Spec.WebhookURL == "" {
		return
	}
	id := acct + "/" + task.Name
	rec, ok := r.hooks.get(acct, task.Name)
	if !ok || rec.accepted == 0 {
		r.fail("task %s ended %s but no signed completion webhook was accepted (state %+v)", id, task.Status.Phase, task.Status.Webhook)
		return
	}
	if len(rec.webhookIDs) != 1 {
		r.fail("task %s: deliveries carried %d different webhook-ids: %v", id, len(rec.webhookIDs), keys(rec.webhookIDs))
	} else if want := "msg_" + string(task.UID); !rec.webhookIDs[want] {
		r.fail("task %s: webhook-id %v, want %s", id, keys(rec.webhookIDs), want)
	}
	if len(rec.statuses) != 1 {
		r.fail("task %s: deliveries announced different outcomes: %v", id, keys(rec.statuses))
	}
}

func (r *run) summary(ctx context.Context, took time.Duration) string {
	var tasks, succeeded, failed, refusedLate int
	// Tasks the backend was scripted to let succeed, and how many of those did: the succeeded
	// count alone moves with the random fates from run to run, this one with the faults.
	var fatedToSucceed, fatedAndSucceeded int
	resubmitted := 0          // stages submitted again after a backend restart lost them
	codes := map[string]int{} // failed tasks by error code: what the faults cost, run to run
	for _, a := range r.accounts {
		var l videogenv1alpha1.VideoTaskList
		if err := r.stack.Client.List(ctx, &l, client.InNamespace(a.name)); err != nil {
			continue
		}
		for _, t := range l.Items {
			tasks++
			for _, st := range t.Status.Stages {
				resubmitted += int(st.Resubmissions)
			}
			if outcomeOf(generation.WorkKey(t.Namespace, t.Name, string(t.UID), videogenv1alpha1.StageAnalyze)) == succeed {
				fatedToSucceed++
				if t.Status.Phase == videogenv1alpha1.TaskSucceeded {
					fatedAndSucceeded++
				}
			}
			switch t.Status.Phase {
			case videogenv1alpha1.TaskSucceeded:
				succeeded++
			case videogenv1alpha1.TaskFailed:
				failed++
				if t.Status.Error != nil {
					codes[t.Status.Error.Code]++
				}
				if t.Status.Error != nil && t.Status.Error.Code == "insufficient_balance" {
					refusedLate++ // never here: the accounts hold a million points
				}
			}
		}
	}
	var events videogenv1alpha1.PaymentEventList
	_ = r.stack.Client.List(ctx, &events, client.InNamespace(localstack.SystemNamespace))
	byCode := make([]string, 0, len(codes))
	for code, n := range codes {
		byCode = append(byCode, fmt.Sprintf("%s=%d", code, n))
	}
	sort.Strings(byCode)
	c := &r.count
	return fmt.Sprintf("chaos: tasks=%d (succeeded=%d failed=%d [%s] direct=%d; scripted to succeed=%d, of which succeeded=%d) kills=%d (manager=%d apiserver=%d) backend-outages=%d (restarts=%d, stages resubmitted=%d) "+
		"requests=%d replays=%d retries=%d in-use-409=%d deliveries=%d (refused=%d) payment-events=%d (deliveries=%d) "+
		"insufficient-balance=%d watch-delay=%s took=%s",
		tasks, succeeded, failed, strings.Join(byCode, " "), c.directTasks.Load(), fatedToSucceed, fatedAndSucceeded, c.managerKills.Load()+c.apiserverKills.Load(), c.managerKills.Load(),
		c.apiserverKills.Load(), c.backendOutages.Load(), c.backendRestarts.Load(), resubmitted, c.sends.Load(), c.replays.Load(), c.retries.Load(), c.inUse.Load(),
		r.hooks.accepted.Load(), r.hooks.refused.Load(), len(events.Items), r.payments.deliveries.Load(), refusedLate, r.set.watchDelay, took.Round(time.Second))
}

// call sends one REST request; a transport error is returned, not retried.
func (r *run) call(ctx context.Context, method, path, key string, body []byte, headers ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// Either replica: both ask the one ledger, so the books cannot tell them apart.
	api := r.stack.APIURLs[rand.IntN(len(r.stack.APIURLs))]
	req, err := http.NewRequestWithContext(ctx, method, api+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

func buildBinaries(t *testing.T, names ...string) string {
	dir := t.TempDir()
	must(t, stacktest.Build(dir, names...))
	return dir
}

// freeAddr is a loopback address for a process the test starts.
func freeAddr(t *testing.T) string {
	addr, err := testenv.FreeAddr()
	must(t, err)
	return addr
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// testLog sends the stack's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
