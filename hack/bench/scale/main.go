// Command scale measures the manager at scale: 10,000 finished and 1,000 active tasks across
// 100 accounts. The manager runs as a real process (built from ./cmd/manager, manager defaults)
// against envtest, so its resident memory is its own: VmRSS from /proc/<pid>/status, sampled
// every second. Active tasks run on a local HTTP backend (the protocol of
// docs/backend-protocol.md) that keeps every stage running, so they are polled at the default
// interval. Reconcile queue latency is controller-runtime's workqueue_queue_duration_seconds,
// scraped from the manager's metrics endpoint (protobuf, native histogram).
//
//	go run ./hack/bench/scale [-finished 10000 -active 1000 -accounts 100 -steady 60s]
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protodelim"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/controllers"
	"github.com/videogen-dev/videogen-operator/hack/bench/internal/harness"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// finishedOpen leaves the finished tasks without status.closed: a cluster upgraded from a
// manager that did not close tasks, whose first start closes them all.
var finishedOpen = flag.Bool("finished-open", false, "create the finished tasks without status.closed (as before it existed)")

func main() {
	finished := flag.Int("finished", 10000, "finished (succeeded, deducted) tasks")
	active := flag.Int("active", 1000, "active tasks (their stage keeps running)")
	flag.StringVar(&managerLog, "manager-log", "", "copy the manager's log here at the end")
	flag.StringVar(&activeState, "active-state", "pending",
		"how the active tasks wait for the manager: pending (new, never accepted: a burst of acceptances) or running (accepted, points frozen, first stage running: a manager restart)")
	accounts := flag.Int("accounts", 100, "accounts the tasks are spread over")
	steady := flag.Duration("steady", 60*time.Second, "how long to watch the manager once every active task runs")
	conc := flag.Int("c", 64, "create concurrency")
	limit := flag.Duration("timeout", 10*time.Minute, "stop after this long, whatever happens")
	flag.Func("manager-flag", "an extra flag for the manager, e.g. --max-concurrent-tasks=32 (repeatable)", func(v string) error {
		managerFlags = append(managerFlags, v)
		return nil
	})
	flag.Parse()
	ctx, cancel := harness.Bounded(*limit)
	defer cancel()
	if err := run(ctx, *finished, *active, *accounts, *conc, *steady); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// managerFlags are passed to the manager after the harness's own.
var managerFlags []string

// activeState: "pending" or "running" (see the flag); managerLog: where to copy the log.
var activeState, managerLog string

func describeFlags() string {
	if len(managerFlags) == 0 {
		d := controllers.DefaultOptions().Task
		return fmt.Sprintf("default flags (poll interval %s, %d concurrent task reconciles)", d.PollInterval, d.MaxConcurrentReconciles)
	}
	return "default flags but `" + strings.Join(managerFlags, " ") + "`"
}

// scaleRun is one run's state, shared by its steps.
type scaleRun struct {
	nFinished, nActive, nAccounts, conc int
	steady                              time.Duration

	dir     string // the manager binary, its kubeconfig, backends config and log
	env     *harness.Env
	accts   []harness.Account
	backend *runningBackend
	metrics string // the manager's metrics address

	// Seeding.
	seededRV          map[string]string // running tasks: the resourceVersion the bench left them at
	seeded            time.Duration
	listOpen, listAll time.Duration

	// The manager process.
	cmd       *exec.Cmd
	done      chan struct{}
	peak      atomic.Int64
	started   time.Time // when it was started
	cpuBefore harness.CPU

	// Startup.
	requestsBefore, requestsStartup map[string]float64
	atStartup                       scraped
	startup                         time.Duration
	cpuStartup                      harness.CPU
	rewritten                       int
	rssStartup                      int64

	// Steady state.
	atEnd                          scraped
	rssEnd, observes               int64
	accountsWritten, accountsTotal int
}

// run builds the manager, seeds the tasks, starts the manager as a process over them, waits
// for its startup, watches it in steady state, and prints the report.
func run(ctx context.Context, nFinished, nActive, nAccounts, conc int, steady time.Duration) error {
	if activeState != "pending" && activeState != "running" {
		return fmt.Errorf("-active-state must be pending or running, not %q", activeState)
	}
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r := &scaleRun{nFinished: nFinished, nActive: nActive, nAccounts: nAccounts, conc: conc, steady: steady, dir: dir}
	if err := r.buildManager(ctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "starting the control plane…")
	if r.env, err = harness.Start(ctx); err != nil {
		return err
	}
	defer r.env.Stop()
	if err := r.seed(ctx); err != nil {
		return err
	}
	stopBackend, err := r.startBackend()
	if err != nil {
		return err
	}
	defer stopBackend()
	stopManager, err := r.startManager(ctx)
	if err != nil {
		return err
	}
	defer stopManager()
	sampler, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	go func() {
		for sampler.Err() == nil {
			r.sample()
			time.Sleep(time.Second)
		}
	}()
	if err := r.waitForStartup(ctx); err != nil {
		return err
	}
	if err := r.watchSteady(ctx); err != nil {
		return err
	}
	r.report()
	return nil
}

// buildManager builds ./cmd/manager into the run's directory: the manager runs as the process
// it is in production.
func (r *scaleRun) buildManager(ctx context.Context) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "building ./cmd/manager…")
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(r.dir, "manager"), "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	return nil
}

// seed writes the manager's kubeconfig and creates the accounts, the finished tasks and the
// active ones, then times one list of the open tasks and one of all.
func (r *scaleRun) seed(ctx context.Context) error {
	env, conc := r.env, r.conc
	user, err := env.Env.AddUser(envtest.User{Name: "bench-manager", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return err
	}
	accts, err := env.CreateAccounts(ctx, "acct", r.nAccounts, 1<<40, false)
	if err != nil {
		return err
	}
	r.accts = accts

	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "creating %d finished tasks (create + status update each) at c=%d…\n", r.nFinished, conc)
	res := harness.Run(ctx, r.nFinished, conc, func(ctx context.Context, i int) error {
		task := harness.Task(accts[i%len(accts)].Namespace, "")
		if err := env.Client.Create(ctx, task); err != nil {
			return err
		}
		finish(task)
		return env.Client.Status().Update(ctx, task)
	})
	if err := res.Check("finished tasks"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "creating %d active tasks (%s)…\n", r.nActive, activeState)
	var mu sync.Mutex
	r.seededRV = map[string]string{}
	res = harness.Run(ctx, r.nActive, conc, func(ctx context.Context, i int) error {
		task := harness.Task(accts[i%len(accts)].Namespace, "")
		if activeState == "running" {
			// A running stage is guarded by the manager's finalizer (deleting the task cancels it).
			task.Finalizers = []string{videogenv1alpha1.FinalizerCancelWork}
		}
		if err := env.Client.Create(ctx, task); err != nil || activeState == "pending" {
			return err
		}
		startRunning(task)
		if err := env.Client.Status().Update(ctx, task); err != nil {
			return err
		}
		mu.Lock()
		r.seededRV[task.Namespace+"/"+task.Name] = task.ResourceVersion
		mu.Unlock()
		return nil
	})
	if err := res.Check("active tasks"); err != nil {
		return err
	}
	// Running tasks hold their points by their status (charge Frozen), as after acceptance.
	r.seeded = time.Since(t0)
	r.listOpen, r.listAll, err = timeLists(ctx, env)
	return err
}

// startBackend serves the HTTP backend that keeps every stage running, and writes the
// manager's backends config pointing at it.
func (r *scaleRun) startBackend() (stop func(), err error) {
	r.backend = &runningBackend{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: r.backend, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	backends := filepath.Join(r.dir, "backends.yaml")
	if err := os.WriteFile(backends, []byte(fmt.Sprintf("backends:\n- name: bench\n  capabilities: [video.short, video.eraser, video.template, image.pose]\n  http:\n    url: http://%s\n", ln.Addr())), 0o644); err != nil {
		_ = hs.Close()
		return nil, err
	}
	return func() { _ = hs.Close() }, nil
}

// startManager starts the manager process over the seeded tasks; stop ends it (SIGTERM, then
// a kill after 15 s) and copies its log if asked.
func (r *scaleRun) startManager(ctx context.Context) (stop func(), err error) {
	if r.metrics, err = freeAddr(); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(r.dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	closeLog := func() {
		_ = logFile.Close()
		if managerLog != "" {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				_ = os.WriteFile(managerLog, b, 0o644)
			}
		}
	}
	args := append([]string{"--metrics-bind-address=" + r.metrics, "--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:0", "--backends-config=" + filepath.Join(r.dir, "backends.yaml"), "--webhook-secret-namespace=" + harness.KeyNamespace, "--ledger-bind-address=0"},
		managerFlags...)
	r.cmd = exec.Command(filepath.Join(r.dir, "manager"), args...)
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(r.dir, "kubeconfig"))
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if r.requestsBefore, err = r.env.KubeRequests(ctx); err != nil {
		closeLog()
		return nil, err
	}
	fmt.Fprintln(os.Stderr, "starting the manager process…")
	cpuBefore := harness.ReadCPU()
	started := time.Now()
	if err := r.cmd.Start(); err != nil {
		closeLog()
		return nil, err
	}
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	r.started, r.cpuBefore = started, cpuBefore // waitForStartup measures from here
	return func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		closeLog()
	}, nil
}

// waitForStartup waits until every active task has its analyze stage running on the backend
// (pending), or has been observed there once (running), and every work queue is empty, so that
// the startup burst's tail is not counted as steady; then it notes the startup figures.
func (r *scaleRun) waitForStartup(ctx context.Context) error {
	ready := r.backend.submits.Load
	if activeState == "running" {
		ready = r.backend.distinctObserved
	}
	fmt.Fprintf(os.Stderr, "waiting for %d active tasks to run…\n", r.nActive)
	for int(ready()) < r.nActive {
		select {
		case <-r.done:
			return fmt.Errorf("the manager exited; see its log")
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d active tasks started: %w", ready(), r.nActive, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var err error
	r.atStartup, err = scrape(ctx, r.metrics)
	for err == nil && queued(r.atStartup) > 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		r.atStartup, err = scrape(ctx, r.metrics)
	}
	if err != nil {
		return err
	}
	r.startup = time.Since(r.started)
	r.cpuStartup = harness.ReadCPU().Sub(r.cpuBefore)
	if r.requestsStartup, err = r.env.KubeRequests(ctx); err != nil {
		return err
	}
	if r.rewritten, err = countRewritten(ctx, r.env, r.seededRV); err != nil {
		return err
	}
	r.rssStartup = r.sample()
	return nil
}

// watchSteady watches the manager for the steady period, when nothing settles: its memory,
// its backend polls and the accounts it writes.
func (r *scaleRun) watchSteady(ctx context.Context) error {
	observesBefore := r.backend.observes.Load()
	accountsBefore, err := accountVersions(ctx, r.env)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "watching for %s…\n", r.steady)
	var steadyMax int64
	for end := time.Now().Add(r.steady); time.Now().Before(end); time.Sleep(time.Second) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		steadyMax = max(steadyMax, r.sample())
	}
	if r.atEnd, err = scrape(ctx, r.metrics); err != nil {
		return err
	}
	r.rssEnd = r.sample()
	r.observes = r.backend.observes.Load() - observesBefore
	accountsAfter, err := accountVersions(ctx, r.env)
	if err != nil {
		return err
	}
	for k, rv := range accountsAfter {
		if accountsBefore[k] != rv {
			r.accountsWritten++
		}
	}
	r.accountsTotal = len(accountsAfter)
	return nil
}

// report prints the run's tables (docs/benchmarks.md quotes them) and the goals.
func (r *scaleRun) report() {
	nFinished, nActive, nAccounts, steady := r.nFinished, r.nActive, r.nAccounts, r.steady
	atStartup, atEnd, observes := r.atStartup, r.atEnd, r.observes
	fmt.Printf("### Scale: the manager with %d finished and %d active (%s) tasks\n", nFinished, nActive, activeState)
	fmt.Println()
	fmt.Println("Machine:", harness.Machine())
	fmt.Println()
	what, until := "Pending (never accepted)", "first stage was submitted"
	if activeState == "running" {
		what, until = "Running (accepted, points frozen, first stage running: a manager restart)", "running stage was observed once"
	}
	closed := "closed"
	if *finishedOpen {
		closed = "not closed"
	}
	fmt.Printf("%d finished (Succeeded, Deducted, %s) and %d active tasks, %s, across %d accounts, created before the manager starts (%.0f s); "+
		"the manager is `./cmd/manager` as a process with %s and a local HTTP backend that keeps every stage running. "+
		"Startup is from exec until every active task's %s and every work queue was empty (%.1f s); steady is the %s after that (%d backend polls, %.0f/s).\n\n",
		nFinished, closed, nActive, what, nAccounts, r.seeded.Seconds(), describeFlags(), until, r.startup.Seconds(), steady, observes, float64(observes)/steady.Seconds())
	fmt.Printf("One list of the open tasks (the manager's field selector, `status.closed!=true`) took %s; of all tasks %s (uncached client, before the manager starts).\n\n",
		secs(r.listOpen.Seconds()), secs(r.listAll.Seconds()))
	fmt.Printf("Requests the kube-apiserver served during startup (its `apiserver_request_total`), per active task:\n\n")
	harness.PrintRequests(os.Stdout, r.requestsBefore, r.requestsStartup, nActive)
	fmt.Printf("\nCPU during startup, ms per active task (user + system from /proc; \"manager\" is the manager process, \"this process\" the bench and its backend):\n\n")
	harness.PrintCPU(os.Stdout, []harness.Phase{{Name: "startup", CPU: r.cpuStartup, Items: nActive, Wall: r.startup}})
	fmt.Println()
	if activeState == "running" {
		fmt.Printf("Status writes by the restarted manager to the %d running tasks during startup: %d.\n\n", nActive, r.rewritten)
	}
	fmt.Printf("PointAccounts written during the steady %s (nothing settles then): %d of %d.\n\n", steady, r.accountsWritten, r.accountsTotal)
	fmt.Println("| manager RSS peak | RSS after startup | RSS at end | Go heap in use at end |")
	fmt.Println("|---:|---:|---:|---:|")
	fmt.Printf("| **%s** | %s | %s | %s |\n\n", mib(r.peak.Load()), mib(r.rssStartup), mib(r.rssEnd), mib(int64(gauge(atEnd, "go_memstats_heap_inuse_bytes"))))
	fmt.Println("Reconcile queue latency (`workqueue_queue_duration_seconds`, p99 from the native histogram, ~5 % bucket width):")
	fmt.Println()
	fmt.Println("| controller | startup: items | startup p50 | startup p99 | steady: items | steady p50 | steady p99 |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	worstStartup, worstSteady := 0.0, 0.0
	worse := func(a, b float64) float64 {
		if math.IsNaN(b) {
			return a
		}
		return max(a, b)
	}
	for _, name := range []string{"videotask", "videotask-webhook", "pointaccount", "pointtopup", "shorttemplate", "paymentevent"} {
		s, ok1 := atStartup[name]
		e, ok2 := atEnd[name]
		if !ok1 || !ok2 {
			continue
		}
		d := e.minus(s)
		worstStartup, worstSteady = worse(worstStartup, s.quantile(0.99)), worse(worstSteady, d.quantile(0.99))
		fmt.Printf("| %s | %.0f | %s | %s | %.0f | %s | %s |\n", name, s.count, secs(s.quantile(0.5)), secs(s.quantile(0.99)),
			d.count, secs(d.quantile(0.5)), secs(d.quantile(0.99)))
	}
	fmt.Println()
	fmt.Printf("Goals: RSS < 300 MiB: **%s** (peak %s); p99 queue latency < 1 s in steady state: **%s** (worst p99 %s); during startup (every task enqueued at once): **%s** (worst p99 %s).\n",
		verdict(r.peak.Load() < 300<<20), mib(r.peak.Load()), verdict(worstSteady < 1), secs(worstSteady), verdict(worstStartup < 1), secs(worstStartup))
}

// sample reads the manager's RSS and keeps the peak.
func (r *scaleRun) sample() int64 {
	rss := vmRSS(r.cmd.Process.Pid)
	for {
		p := r.peak.Load()
		if rss <= p || r.peak.CompareAndSwap(p, rss) {
			return rss
		}
	}
}
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// finish gives a task the status of one that succeeded and was deducted an hour ago, closed as
// the manager leaves such a task (with -finished-open, as a manager before status.closed did).
func finish(t *videogenv1alpha1.VideoTask) {
	t.Status = harness.FinishedStatus(t, !*finishedOpen, time.Now().Add(-time.Hour))
}

// startRunning makes t an accepted task whose analyze stage runs on the bench backend, with
// the status the manager writes for it (so a restarted manager's first look writes nothing
// unless something changed: countRewritten checks).
func startRunning(t *videogenv1alpha1.VideoTask) {
	at := metav1.NewTime(time.Now().Add(-time.Minute))
	t.Status = videogenv1alpha1.VideoTaskStatus{
		Phase: videogenv1alpha1.TaskRunning, Cost: ptr.To[int64](harness.TemplatePrice), Charge: videogenv1alpha1.ChargeFrozen,
		Progress: 15, StartedAt: &at, ObservedGeneration: t.Generation, // analyze at 50 % weighs 30 %
		Stages: []videogenv1alpha1.StageStatus{
			{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageRunning, Backend: "bench", Handle: "stg_" + t.Name + "a",
				Progress: 50, StartedAt: &at},
			{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StagePending},
		},
		Conditions: []metav1.Condition{
			{Type: videogenv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonFrozen,
				Message: "Froze 10 points", LastTransitionTime: at, ObservedGeneration: t.Generation},
			{Type: videogenv1alpha1.ConditionDispatched, Status: metav1.ConditionTrue, Reason: videogenv1alpha1.ReasonBackendAccepted,
				Message: "bench accepted the analyze stage", LastTransitionTime: at, ObservedGeneration: t.Generation},
		},
	}
}

// timeLists times one list of the open VideoTasks and one of all of them, as an informer's
// first list would make them (resourceVersion 0: from the apiserver's watch cache).
func timeLists(ctx context.Context, env *harness.Env) (open, all time.Duration, err error) {
	for i, opts := range [][]client.ListOption{
		{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")}},
		nil,
	} {
		t0 := time.Now()
		var list videogenv1alpha1.VideoTaskList
		if err := env.Client.List(ctx, &list, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})...); err != nil {
			return 0, 0, err
		}
		if i == 0 {
			open = time.Since(t0)
		} else {
			all = time.Since(t0)
		}
	}
	return open, all, nil
}

// accountVersions maps each PointAccount to its resourceVersion.
func accountVersions(ctx context.Context, env *harness.Env) (map[string]string, error) {
	var list videogenv1alpha1.PointAccountList
	if err := env.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Items))
	for _, a := range list.Items {
		out[a.Namespace] = a.ResourceVersion
	}
	return out, nil
}

// countRewritten returns how many of the seeded running tasks the manager has written since.
func countRewritten(ctx context.Context, env *harness.Env, seeded map[string]string) (int, error) {
	if len(seeded) == 0 {
		return 0, nil
	}
	var list videogenv1alpha1.VideoTaskList
	if err := env.Client.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for _, t := range list.Items {
		if rv, ok := seeded[t.Namespace+"/"+t.Name]; ok && rv != t.ResourceVersion {
			n++
		}
	}
	return n, nil
}

// runningBackend speaks the HTTP backend protocol and keeps every stage running.
type runningBackend struct {
	mu       sync.Mutex
	keys     map[string]bool
	seen     map[string]bool
	submits  atomic.Int64 // distinct analyze stages
	observes atomic.Int64
	distinct atomic.Int64 // distinct stages observed
}

func (b *runningBackend) distinctObserved() int64 { return b.distinct.Load() }

func (b *runningBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/stages":
		var req struct {
			Key   string `json:"key"`
			Stage string `json:"stage"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_request","message":"bad body"}}`))
			return
		}
		sum := sha256.Sum256([]byte(req.Key))
		id := "stg_" + hex.EncodeToString(sum[:12])
		b.mu.Lock()
		if b.keys == nil {
			b.keys = map[string]bool{}
		}
		status := http.StatusOK
		if !b.keys[req.Key] {
			b.keys[req.Key] = true
			status = http.StatusCreated
			if req.Stage == "analyze" {
				b.submits.Add(1)
			}
		}
		b.mu.Unlock()
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "key": req.Key, "state": "running", "progress": 10})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/stages/"):
		b.observes.Add(1)
		id := strings.TrimPrefix(r.URL.Path, "/v1/stages/")
		b.mu.Lock()
		if b.seen == nil {
			b.seen = map[string]bool{}
		}
		if !b.seen[id] {
			b.seen[id] = true
			b.distinct.Add(1)
		}
		b.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/v1/stages/"), "state": "running", "progress": 50})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such endpoint"}}`))
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func vmRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func secs(s float64) string {
	if math.IsNaN(s) {
		return "–"
	}
	return harness.Ms(time.Duration(s * float64(time.Second)))
}

// hist is a native histogram's buckets as upper bound → count, plus the count.
type hist struct {
	count   float64
	buckets map[float64]float64 // upper bound → count in that bucket
}

func (h hist) minus(o hist) hist {
	out := hist{count: h.count - o.count, buckets: map[float64]float64{}}
	for ub, n := range h.buckets {
		if d := n - o.buckets[ub]; d > 0 {
			out.buckets[ub] = d
		}
	}
	return out
}

// quantile returns the upper bound of the bucket holding the q-quantile.
func (h hist) quantile(q float64) float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	ubs := make([]float64, 0, len(h.buckets))
	for ub := range h.buckets {
		ubs = append(ubs, ub)
	}
	slicesSort(ubs)
	var seen float64
	for _, ub := range ubs {
		seen += h.buckets[ub]
		if seen >= q*h.count {
			return ub
		}
	}
	return ubs[len(ubs)-1]
}

func slicesSort(f []float64) {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j] < f[j-1]; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
}

type scraped map[string]hist

// scrape reads the manager's metrics as protobuf (the only exposition with native histograms)
// and returns the queue-duration histogram per controller, plus the gauges under "".
func scrape(ctx context.Context, addr string) (scraped, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := scraped{}
	gauges := hist{buckets: map[float64]float64{}}
	var depth hist
	r := bufio.NewReader(resp.Body)
	for {
		mf := &dto.MetricFamily{}
		if err := protodelim.UnmarshalFrom(r, mf); err != nil {
			break
		}
		if mf.GetName() == "go_memstats_heap_inuse_bytes" && len(mf.GetMetric()) > 0 {
			gauges.count = mf.GetMetric()[0].GetGauge().GetValue()
		}
		if mf.GetName() == "workqueue_depth" {
			for _, m := range mf.GetMetric() {
				depth.count += m.GetGauge().GetValue()
			}
		}
		if mf.GetName() != "workqueue_queue_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			name := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					name = l.GetValue()
				}
			}
			out[name] = nativeBuckets(m.GetHistogram())
		}
	}
	out["\x00gauges"] = gauges
	out["\x00depth"] = depth
	if len(out) == 2 {
		return nil, fmt.Errorf("no workqueue_queue_duration_seconds in the manager's metrics")
	}
	return out, nil
}

func gauge(s scraped, _ string) float64 { return s["\x00gauges"].count }

// queued is the number of items ready in all the manager's work queues (workqueue_depth).
func queued(s scraped) float64 { return s["\x00depth"].count }

// nativeBuckets decodes a native histogram (schema, spans, delta counts) into upper bounds;
// without native data it falls back to the classic buckets.
func nativeBuckets(h *dto.Histogram) hist {
	out := hist{count: float64(h.GetSampleCount()), buckets: map[float64]float64{}}
	if h.GetSchema() == 0 && len(h.GetPositiveSpan()) == 0 {
		var prev float64
		for _, b := range h.GetBucket() {
			out.buckets[b.GetUpperBound()] = float64(b.GetCumulativeCount()) - prev
			prev = float64(b.GetCumulativeCount())
		}
		if rest := out.count - prev; rest > 0 {
			out.buckets[math.Inf(1)] = rest
		}
		return out
	}
	if z := h.GetZeroCount(); z > 0 {
		out.buckets[h.GetZeroThreshold()] = float64(z)
	}
	base := math.Pow(2, math.Pow(2, -float64(h.GetSchema())))
	idx, k := int32(0), 0
	var count int64
	deltas := h.GetPositiveDelta()
	for _, sp := range h.GetPositiveSpan() {
		idx += sp.GetOffset()
		for range sp.GetLength() {
			count += deltas[k]
			k++
			if count > 0 {
				out.buckets[math.Pow(base, float64(idx))] += float64(count)
			}
			idx++
		}
	}
	return out
}
