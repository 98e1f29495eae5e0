// Command lifecycle measures a task's whole life with the controllers running in-process
// (controllers.Setup, the manager's defaults) and a backend that completes every stage at once:
// tasks are submitted through the REST API (POST /v1/videos/short) and counted as done when
// their status says Deducted and the account write that deducted their points has landed.
// Every write of the apiserver's and the manager's clients is counted per controller, kind and
// call. The raw create rate of the same VideoTasks at the same concurrency is measured first,
// in the same run, before the controllers start; the bound (creates each followed by one
// status update) before the tasks and again after them, with the controllers stopped.
//
//	go run ./hack/bench/lifecycle [-tasks 1000 -accounts 16 -c 32]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
)

func main() {
	tasks := flag.Int("tasks", 1000, "tasks to run through their whole life")
	accounts := flag.Int("accounts", 16, "accounts the tasks are spread over")
	conc := flag.Int("c", 32, "submission concurrency (and raw create concurrency)")
	limit := flag.Duration("timeout", 8*time.Minute, "stop after this long, whatever happens")
	workers := flag.Int("workers", controllers.DefaultOptions().Task.MaxConcurrentReconciles, "concurrent VideoTask reconciles (the manager's --max-concurrent-tasks)")
	flag.DurationVar(&writeInterval, "ledger-write-interval", controllers.DefaultOptions().Ledger.WriteInterval, "least time between two writes of one account (the manager's --ledger-write-interval)")
	flag.StringVar(&kubeProfile, "kube-cpuprofile", "", "write a CPU profile of the kube-apiserver over 10 s from the first submission here")
	profile := flag.String("cpuprofile", "", "write a CPU profile of this process (manager, REST apiserver, client) here")
	runs := flag.Int("runs", 5, "runs, each on a control plane of its own; the last one's tables are printed in full")
	flag.BoolVar(&pin, "pin", false, "run the control plane on CPU 0 and this process on the others, as on a cluster where they have nodes of their own")
	flag.BoolVar(&showTimeline, "timeline", false, "print each run's task phase in 250 ms steps: the cores the control plane and this process used, and the writes that landed")
	flag.Parse()
	defer harness.Profile(*profile)()
	ctx, cancel := harness.Bounded(*limit)
	defer cancel()
	var all []summary
	for i := range *runs {
		s, err := run(ctx, *tasks, *accounts, *conc, *workers, i == *runs-1)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lifecycle:", err)
			os.Exit(1)
		}
		all = append(all, s)
	}
	report(all, *tasks, *accounts, *conc)
}

var (
	showTimeline  bool
	pin           bool
	kubeProfile   string
	writeInterval time.Duration
)

// summary is what one run measured.
type summary struct {
	raw, ceiling, settled float64 // per second; ceiling: before and after the tasks together
	watched               float64 // per second: the bound with the stack's two watchers running
	// the bounds measured before and after the tasks, apart
	ceilingBefore, ceilingAfter, watchedBefore, watchedAfter float64
	writes, accountWrites                                    float64 // per task, all clients; PointAccount writes
	deletes                                                  float64 // per task: deleting the closed tasks, as the collector does
	// controlPlane is the bound's kube-apiserver + etcd CPU per task ÷ a settled task's: the
	// control plane's share alone, which on this machine shares its cores with the operator
	controlPlane float64
	p50, p99     time.Duration
}

// report prints the runs side by side, their medians and worst, and the goals.
func report(all []summary, nTasks, nAccounts, conc int) {
	fmt.Println()
	fmt.Printf("#### %d runs of %d tasks over %d accounts at c=%d\n\n", len(all), nTasks, nAccounts, conc)
	fmt.Println("| run | raw creates/s | the bound: creates + 1 status update/s (before / after the tasks) | the bound, 2 watches (before / after) | tasks settled/s | settled ÷ bound | settled ÷ watched bound | control plane CPU per task, bound ÷ settled | writes per task | of which PointAccount | deletes per task | submit → settled p50 | p99 |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var ratios, watchedRatios, controlPlane, acctW []float64
	for i, s := range all {
		r, rw := s.settled/s.ceiling, s.settled/s.watched
		ratios, watchedRatios, acctW = append(ratios, r), append(watchedRatios, rw), append(acctW, s.accountWrites)
		controlPlane = append(controlPlane, s.controlPlane)
		fmt.Printf("| %d | %.0f | %.0f (%.0f / %.0f) | %.0f (%.0f / %.0f) | %.0f | **%.2f** | %.2f | %.2f | %.2f | %.3f | %.2f | %s | %s |\n", i+1, s.raw,
			s.ceiling, s.ceilingBefore, s.ceilingAfter, s.watched, s.watchedBefore, s.watchedAfter, s.settled, r, rw, s.controlPlane,
			s.writes, s.accountWrites, s.deletes, harness.Ms(s.p50), harness.Ms(s.p99))
	}
	med := median(ratios)
	fmt.Println()
	fmt.Printf("Settled ÷ bound: median **%.2f**, worst %.2f (÷ the bound with 2 watches: median %.2f, worst %.2f; the control plane's CPU per task, bound ÷ settled: median %.2f, worst %.2f). PointAccount writes per task: median %.3f, worst %.3f.\n\n",
		med, slices.Min(ratios), median(watchedRatios), slices.Min(watchedRatios), median(controlPlane), slices.Min(controlPlane), median(acctW), slices.Max(acctW))
	fmt.Printf("Goals: tasks settled ≥ 0.8 of the bound (median): **%s**; ≤ 0.1 PointAccount writes per task: **%s**.\n",
		verdict(med >= 0.8), verdict(slices.Max(acctW) <= 0.1))
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// lifecycleRun is one run's state, shared by its steps.
type lifecycleRun struct {
	nTasks, nAccounts, conc, workers int

	env     *harness.Env
	accts   []harness.Account
	counter *harness.Counter
	api     *harness.APIServer

	raw, sub harness.Result
	// the bounds, before and after the tasks: the control plane slows as its history grows, so
	// a bound measured only before the tasks would favour it
	before, after bounds
	// CPU of the raw creates, and of the tasks from the first submission until every one settled
	rawPhase, taskPhase harness.Phase
	phases              []harness.Phase // all of them, in the order printed

	// deducted is when each task's status first said Deducted, from the manager's writes.
	mu       sync.Mutex
	deducted map[string]time.Time
	timeline *timeline // nil unless -timeline

	statsBefore, statsAfter       map[string]*harness.ReconcileStats
	requestsBefore, requestsAfter map[string]float64
}

// run is one run on a control plane of its own: the control plane's bounds first, then the
// controllers and the REST apiserver, then tasks from submission to settled, then the count.
func run(ctx context.Context, nTasks, nAccounts, conc, workers int, full bool) (summary, error) {
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	env, err := harness.Start(ctx)
	if err != nil {
		return summary{}, err
	}
	defer env.Stop()
	if pin {
		if err := harness.PinControlPlane(); err != nil {
			return summary{}, err
		}
	}
	ctx, stopClients := context.WithCancel(ctx)
	defer stopClients()

	r := &lifecycleRun{nTasks: nTasks, nAccounts: nAccounts, conc: conc, workers: workers, env: env,
		counter: harness.NewCounter(), deducted: map[string]time.Time{}}
	if showTimeline {
		r.timeline = &timeline{}
	}
	if r.accts, err = env.CreateAccounts(ctx, "acct", nAccounts, 1<<40, true); err != nil {
		return summary{}, err
	}
	if err := r.measureRaw(ctx); err != nil {
		return summary{}, err
	}
	if r.before, err = r.measureBounds(ctx, "bound-before"); err != nil {
		return summary{}, err
	}
	stackCtx, stopStack := context.WithCancel(ctx)
	defer stopStack()
	if err := r.startStack(stackCtx); err != nil {
		return summary{}, err
	}
	rate, lat, err := r.submitUntilSettled(stackCtx)
	if err != nil {
		return summary{}, err
	}
	out, err := r.count(ctx, rate, lat)
	if err != nil {
		return out, err
	}
	// The bounds again, with the stack stopped and the closed tasks still there.
	stopStack()
	time.Sleep(2 * time.Second)
	if r.after, err = r.measureBounds(ctx, "bound-after"); err != nil {
		return summary{}, err
	}
	deletes, err := deleteClosed(ctx, r.counter.Wrap("collector", env.Client), r.accts)
	if err != nil {
		return out, err
	}
	out.deletes = float64(deletes) / float64(nTasks)
	ceiling, watched := r.before.plain.Merge(r.after.plain), r.before.watched.Merge(r.after.watched)
	out.ceiling, out.watched = ceiling.Rate(), watched.Rate()
	out.ceilingBefore, out.ceilingAfter = r.before.plain.Rate(), r.after.plain.Rate()
	out.watchedBefore, out.watchedAfter = r.before.watched.Rate(), r.after.watched.Rate()
	boundPhase := harness.Phase{Name: "create + 1 status update (the bound, before and after)", CPU: r.before.plainCPU.Add(r.after.plainCPU), Items: 2 * nTasks, Wall: ceiling.Elapsed}
	watchedPhase := harness.Phase{Name: "the bound, with 2 watches of VideoTasks (before and after)", CPU: r.before.watchedCPU.Add(r.after.watchedCPU), Items: 2 * nTasks, Wall: watched.Elapsed}
	r.phases = []harness.Phase{r.rawPhase, boundPhase, watchedPhase, r.taskPhase}
	out.controlPlane = (boundPhase.CPU.ControlPlane() / float64(boundPhase.Items)) / (r.taskPhase.CPU.ControlPlane() / float64(r.taskPhase.Items))
	fmt.Fprintf(os.Stderr, "run: settled %.0f/s, bound %.0f/s (before %.0f, after %.0f): %.2f (watched bound %.0f/s: %.2f); %.3f PointAccount writes per task\n",
		rate, out.ceiling, out.ceilingBefore, out.ceilingAfter, rate/out.ceiling, out.watched, rate/out.watched, out.accountWrites)
	if !full {
		return out, nil
	}
	r.printTables(out, rate, lat)
	return out, nil
}

// measureRaw measures raw creates before any controller runs, in a namespace of its own,
// deleted again afterwards.
func (r *lifecycleRun) measureRaw(ctx context.Context) error {
	env, nTasks, conc := r.env, r.nTasks, r.conc
	const rawNS = "raw"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawNS}}); err != nil {
		return err
	}
	_ = harness.Run(ctx, 100, conc, func(ctx context.Context, _ int) error { return env.Client.Create(ctx, harness.Task(rawNS, "")) })
	fmt.Fprintf(os.Stderr, "%d raw creates at c=%d…\n", nTasks, conc)
	cpu0 := harness.ReadCPU()
	r.raw = harness.Run(ctx, nTasks, conc, func(ctx context.Context, _ int) error { return env.Client.Create(ctx, harness.Task(rawNS, "")) })
	cpu1 := harness.ReadCPU()
	if err := r.raw.Check("raw creates"); err != nil {
		return err
	}
	r.rawPhase = harness.Phase{Name: "raw create", CPU: cpu1.Sub(cpu0), Items: nTasks, Wall: r.raw.Elapsed}
	if err := env.Client.DeleteAllOf(ctx, &videogenv1alpha1.VideoTask{}, client.InNamespace(rawNS)); err != nil {
		return err
	}
	return waitEmpty(ctx, env.Client, rawNS)
}

// bounds are the control plane's own write limits at one moment of a run.
type bounds struct {
	plain, watched       harness.Result
	plainCPU, watchedCPU harness.CPU
}

// measureBounds measures, with no controller running, the ceiling of any design that writes a
// task's status once after its create (each object created and then given the status a
// settled task ends with, one status update, nothing else), alone and with the two watches of
// VideoTasks the stack keeps, in namespace ns, deleted again afterwards.
func (r *lifecycleRun) measureBounds(ctx context.Context, ns string) (bounds, error) {
	env, nTasks, conc := r.env, r.nTasks, r.conc
	var b bounds
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return b, err
	}
	createAndSettle := func(ctx context.Context, _ int) error {
		t := harness.Task(ns, "")
		if err := env.Client.Create(ctx, t); err != nil {
			return err
		}
		t.Status = harness.FinishedStatus(t, true, time.Now())
		return env.Client.Status().Update(ctx, t)
	}
	fmt.Fprintf(os.Stderr, "%d creates, each followed by one status update, at c=%d (%s)…\n", nTasks, conc, ns)
	cpu0 := harness.ReadCPU()
	b.plain = harness.Run(ctx, nTasks, conc, createAndSettle)
	cpu1 := harness.ReadCPU()
	if err := b.plain.Check("creates with a status update"); err != nil {
		return b, err
	}
	// The same again with the two watches of VideoTasks the stack keeps (the manager's cache and
	// the REST apiserver's): what the control plane does for those writes with any controller
	// and a cache to serve GET /v1/tasks from. Not the goal's bound; shown beside it.
	stopWatches, err := r.watchTasks(ctx, 2)
	if err != nil {
		return b, err
	}
	cpu2 := harness.ReadCPU()
	b.watched = harness.Run(ctx, nTasks, conc, createAndSettle)
	cpu3 := harness.ReadCPU()
	stopWatches()
	if err := b.watched.Check("creates with a status update, watched"); err != nil {
		return b, err
	}
	b.plainCPU, b.watchedCPU = cpu1.Sub(cpu0), cpu3.Sub(cpu2)
	if err := env.Client.DeleteAllOf(ctx, &videogenv1alpha1.VideoTask{}, client.InNamespace(ns)); err != nil {
		return b, err
	}
	return b, waitEmpty(ctx, env.Client, ns)
}

// watchTasks starts n informers of VideoTasks in all namespaces, each with a connection of its
// own, and returns once they have synced; the returned function stops them.
func (r *lifecycleRun) watchTasks(ctx context.Context, n int) (func(), error) {
	ctx, stop := context.WithCancel(ctx)
	for range n {
		c, err := cache.New(r.env.Cfg, cache.Options{Scheme: r.env.Env.Scheme})
		if err == nil {
			_, err = c.GetInformer(ctx, &videogenv1alpha1.VideoTask{})
		}
		if err != nil {
			stop()
			return nil, err
		}
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			stop()
			return nil, fmt.Errorf("a watch of VideoTasks did not sync")
		}
	}
	return stop, nil
}

// startStack starts the controllers and the REST apiserver, both counted, and notes the
// reconcile and request figures before the tasks.
func (r *lifecycleRun) startStack(ctx context.Context) error {
	// Milestones, from the manager's successful writes: when each task's status said Deducted.
	// The ledger writes the charge into the account first, so a task is settled then.
	r.counter.OnWrite = func(_, verb string, obj client.Object) {
		now := time.Now()
		r.timeline.write(now, verb, obj)
		if verb != "status update" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if o, ok := obj.(*videogenv1alpha1.VideoTask); ok {
			if _, seen := r.deducted[o.Name]; !seen && o.Status.Charge == videogenv1alpha1.ChargeDeducted {
				r.deducted[o.Name] = now
			}
		}
	}
	opts := harness.ControllerOptions(harness.InstantBackend{})
	opts.Task.MaxConcurrentReconciles = r.workers
	opts.Ledger.WriteInterval = writeInterval
	mgr, err := r.env.StartControllers(ctx, r.counter, opts)
	if err != nil {
		return err
	}
	if r.api, err = r.env.StartAPIServer(ctx, r.counter, r.conc, mgr.Ledger); err != nil {
		return err
	}
	if err := r.api.WaitForKeys(ctx, r.accts); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let the first PointAccount reconciles (conditions) pass
	r.counter.Reset()
	if r.statsBefore, err = harness.GatherReconcileStats(); err != nil {
		return err
	}
	r.requestsBefore, err = r.env.KubeRequests(ctx)
	return err
}

// submitUntilSettled submits the tasks through the REST API and waits until each is settled;
// it returns the settled rate (first POST → last settled) and each task's latency.
func (r *lifecycleRun) submitUntilSettled(ctx context.Context) (float64, []time.Duration, error) {
	nTasks, env := r.nTasks, r.env
	fmt.Fprintf(os.Stderr, "submitting %d tasks through the REST API at c=%d…\n", nTasks, r.conc)
	if kubeProfile != "" {
		go func() {
			if err := env.KubeProfile(ctx, 10*time.Second, kubeProfile); err != nil {
				fmt.Fprintln(os.Stderr, "kube-apiserver profile:", err)
			}
		}()
	}
	submitted := make([]time.Time, nTasks)
	names := make([]string, nTasks)
	cpuStart := harness.ReadCPU()
	start := time.Now()
	r.timeline.start()
	r.sub = harness.Run(ctx, nTasks, r.conc, func(ctx context.Context, i int) error {
		submitted[i] = time.Now()
		name, err := r.api.SubmitShort(ctx, r.accts[i%len(r.accts)])
		names[i] = name
		return err
	})
	if err := r.sub.Check("POST /v1/videos/short"); err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		r.mu.Lock()
		n := 0
		for _, name := range names {
			if _, ok := r.deducted[name]; ok {
				n++
			}
		}
		r.mu.Unlock()
		if n >= nTasks {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, nil, fmt.Errorf("only %d of %d tasks settled within 5 minutes", n, nTasks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var last time.Time
	lat := make([]time.Duration, 0, nTasks)
	r.mu.Lock()
	for i, name := range names {
		at := r.deducted[name]
		if at.After(last) {
			last = at
		}
		lat = append(lat, at.Sub(submitted[i]))
	}
	r.mu.Unlock()
	elapsed := last.Sub(start)
	r.timeline.stop()
	r.timeline.print(os.Stderr, start, last)
	r.taskPhase = harness.Phase{Name: "task: REST submission → settled", CPU: harness.ReadCPU().Sub(cpuStart), Items: nTasks, Wall: time.Since(start)}
	return float64(nTasks) / elapsed.Seconds(), lat, nil
}

// count waits for the trailing writes, checks every account's books and counts the writes per
// task (the bounds and the deletes are filled in by run).
func (r *lifecycleRun) count(ctx context.Context, rate float64, lat []time.Duration) (summary, error) {
	var out summary
	env, nTasks := r.env, r.nTasks
	// Trailing writes (the ledger's account write that forgets the journal entries, the last
	// summary) belong to these tasks too: wait until the writes stop.
	quiet(r.counter, 3*time.Second, 60*time.Second)
	if err := checkLedgers(ctx, env.Client, r.accts, nTasks); err != nil {
		return out, err
	}
	var err error
	if r.statsAfter, err = harness.GatherReconcileStats(); err != nil {
		return out, err
	}
	if r.requestsAfter, err = env.KubeRequests(ctx); err != nil {
		return out, err
	}
	res := harness.Result{Lat: lat}
	slices.Sort(res.Lat)
	attempts, _, _ := r.counter.Snapshot()
	var total, acctWrites int64
	for k, n := range attempts {
		total += n
		if k.Kind == "PointAccount" {
			acctWrites += n
		}
	}
	out = summary{raw: r.raw.Rate(), settled: rate, writes: float64(total) / float64(nTasks),
		accountWrites: float64(acctWrites) / float64(nTasks), p50: res.P(0.5), p99: res.P(0.99)}
	return out, nil
}

// printTables prints the last run's tables in full (docs/benchmarks.md quotes them).
func (r *lifecycleRun) printTables(out summary, rate float64, lat []time.Duration) {
	nTasks, raw := r.nTasks, r.raw
	res := harness.Result{Lat: lat}
	slices.Sort(res.Lat)
	fmt.Println("### Lifecycle: REST submission → settled, controllers in-process, instant backend")
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	if pin {
		fmt.Println("\nPinned (-pin): kube-apiserver and etcd on CPU 0, this process on the other CPUs.")
	}
	fmt.Println()
	fmt.Printf("%d tasks over %d accounts, submitted at c=%d through `POST /v1/videos/short`; manager defaults (`controllers.DefaultOptions`) with %d concurrent task reconciles.\n\n", nTasks, r.nAccounts, r.conc, r.workers)
	fmt.Println("| raw VideoTask creates/s (c same) | creates + 1 status update/s (before and after the tasks) | REST submissions/s | tasks settled/s (first POST → last settled) | settled ÷ raw | submit → settled p50 | p99 |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Printf("| %.0f | %.0f (%.2f of raw) | %.0f | %.0f | **%.2f** | %s | %s |\n\n", raw.Rate(), out.ceiling, out.ceiling/raw.Rate(),
		r.sub.Rate(), rate, rate/raw.Rate(), harness.Ms(res.P(0.5)), harness.Ms(res.P(0.99)))
	fmt.Printf("The second column bounds any design that writes a task's status once: the same objects created and then given a settled task's status, nothing else (no points, no controllers, no REST hop), same concurrency, measured before the tasks and again after them (the stack stopped), and taken together. The settled rate is %.2f of that bound.\n\n", rate/out.ceiling)
	fmt.Println("Writes per task (all clients of the REST apiserver and of the manager, counted by a `client/interceptor` wrapper; \"ledger\" is the manager's shared Ledger, driven by the VideoTask controller's settle and the PointAccount controller's trimming):")
	fmt.Println()
	harness.PrintWrites(os.Stdout, r.counter, nTasks)
	fmt.Println()
	fmt.Println("Reconciles (controller-runtime metrics of the in-process manager):")
	fmt.Println()
	harness.PrintReconcileStats(os.Stdout, r.statsBefore, r.statsAfter, nTasks)
	fmt.Println()
	fmt.Println("CPU per item (ms; user + system from /proc, this process being the load generator, the REST apiserver and the manager), side by side:")
	fmt.Println()
	harness.PrintCPU(os.Stdout, r.phases)
	fmt.Println()
	fmt.Println("Requests the kube-apiserver served during the run, reads and watches included (its `apiserver_request_total`; everyone's: the REST apiserver, the manager, the harness's load and polling):")
	fmt.Println()
	harness.PrintRequests(os.Stdout, r.requestsBefore, r.requestsAfter, nTasks)
	fmt.Println()
	fmt.Printf("Deleting the closed tasks afterwards, as the finished-task collector does at their TTL: %.2f writes per task.\n", out.deletes)
}

// deleteClosed deletes the accounts' closed tasks one by one with preconditions, as the
// finished-task collector does, and returns how many writes that took.
func deleteClosed(ctx context.Context, c client.Client, accts []harness.Account) (int, error) {
	n := 0
	for _, a := range accts {
		var tasks videogenv1alpha1.VideoTaskList
		if err := c.List(ctx, &tasks, client.InNamespace(a.Namespace), client.MatchingFields{videogenv1alpha1.FieldStatusClosed: "true"}); err != nil {
			return n, err
		}
		for i := range tasks.Items {
			t := &tasks.Items[i]
			uid, rv := t.UID, t.ResourceVersion
			if err := c.Delete(ctx, t, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// quiet waits until no write happened for idle, at most max.
func quiet(c *harness.Counter, idle, max time.Duration) {
	end := time.Now().Add(max)
	last, lastChange := c.Total(nil), time.Now()
	for time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
		if n := c.Total(nil); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= idle {
			return
		}
	}
}

// checkLedgers verifies that every point was spent as the tasks say: nothing frozen, no
// records left, and the invariants hold.
func checkLedgers(ctx context.Context, c client.Client, accts []harness.Account, nTasks int) error {
	var spent int64
	for _, a := range accts {
		acct := &videogenv1alpha1.PointAccount{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
			return err
		}
		st := acct.Status
		if st.Credited != st.Balance+st.Frozen+st.Spent || st.Balance < 0 {
			return fmt.Errorf("account %s does not add up: %+v", a.Namespace, st)
		}
		if acct.Status.Frozen != 0 {
			return fmt.Errorf("account %s still has %d points frozen", a.Namespace, acct.Status.Frozen)
		}
		spent += acct.Status.Spent
	}
	if want := int64(nTasks) * harness.TemplatePrice; spent != want {
		return fmt.Errorf("spent %d points, want %d", spent, want)
	}
	return nil
}

func waitEmpty(ctx context.Context, c client.Client, ns string) error {
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		l := &videogenv1alpha1.VideoTaskList{}
		if err := c.List(ctx, l, client.InNamespace(ns), client.Limit(1)); err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
	}
	return fmt.Errorf("raw tasks in %s were not deleted within 2 minutes", ns)
}
