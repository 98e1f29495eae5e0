// Package harness is what the benchmark programs under hack/bench share: a control plane
// (envtest), accounts and templates, a concurrent load driver, and write counting.
// Every figure a program prints is a ratio or a count measured in the same run.
package harness

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// KeyNamespace holds API keys and webhook signing secrets, as in a deployment.
const KeyNamespace = "videogen-system"

// TemplateName is the official video.short template every benchmark task uses.
const TemplateName = "bench-short"

// TemplatePrice is its price in points.
const TemplatePrice = 10

// TemplateMediaURL is the bench template's media, which a task's status records when accepted.
const TemplateMediaURL = "https://media.example/bench.mp4"

// Env is a running control plane and an unthrottled client to it.
type Env struct {
	Env    *envtest.Environment
	Cfg    *rest.Config
	Client client.Client
}

// Start runs kube-apiserver and etcd with the CRDs, with client-side rate limiting off, and
// creates the key namespace and the benchmark template.
func Start(ctx context.Context) (*Env, error) {
	logf.SetLogger(logr.Discard())
	env, err := testenv.New()
	if err != nil {
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Env: env, Cfg: cfg, Client: c}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KeyNamespace}}); err != nil {
		e.Stop()
		return nil, err
	}
	tmpl := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: TemplateName},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Benchmark",
			Price: ptr.To[int64](TemplatePrice), MediaURL: TemplateMediaURL}}
	if err := c.Create(ctx, tmpl); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the control plane. Stop the clients first (end their context) so that no watch
// holds the kube-apiserver open.
func (e *Env) Stop() {
	if err := e.Env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
}

// Account is a namespace with a funded PointAccount and, if asked for, an API key.
type Account struct {
	Namespace string
	Key       string
}

// CreateAccount makes namespace ns an account holding balance points. Call it before the
// ledger starts.
func (e *Env) CreateAccount(ctx context.Context, ns string, balance int64, withKey bool) (Account, error) {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return Account{}, err
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: videogenv1alpha1.PointAccountName}}
	if err := e.Client.Create(ctx, acct); err != nil {
		return Account{}, err
	}
	if balance > 0 {
		// The account's figures as an applied top-up leaves them. Written before any ledger
		// runs (a bench starts its ledger after its accounts), which then reads them.
		acct.Status.Credited, acct.Status.Balance = balance, balance
		if err := e.Client.Status().Update(ctx, acct); err != nil {
			return Account{}, err
		}
	}
	a := Account{Namespace: ns}
	if withKey {
		key, _, err := apikeys.Issue(ctx, e.Client, KeyNamespace, ns, "benchmark")
		if err != nil {
			return Account{}, err
		}
		a.Key = key
	}
	return a, nil
}

// CreateAccounts makes n accounts named prefix-0 … prefix-(n-1).
func (e *Env) CreateAccounts(ctx context.Context, prefix string, n int, balance int64, withKey bool) ([]Account, error) {
	out := make([]Account, n)
	res := Run(ctx, n, min(n, 16), func(ctx context.Context, i int) error {
		a, err := e.CreateAccount(ctx, fmt.Sprintf("%s-%d", prefix, i), balance, withKey)
		out[i] = a
		return err
	})
	if res.Errors > 0 {
		return nil, res.FirstErr
	}
	return out, nil
}

// Task is a VideoTask shaped as the REST apiserver builds one for POST /v1/videos/short.
func Task(ns, webhookURL string) *videogenv1alpha1.VideoTask {
	return &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   ns,
			Name:        "vt-" + RandomHex(12),
			Labels:      map[string]string{"videogen.dev/created-by": "apiserver"},
			Annotations: map[string]string{"videogen.dev/request-hash": RandomHex(32)},
		},
		Spec: videogenv1alpha1.VideoTaskSpec{
			Capability:  videogenv1alpha1.CapabilityShort,
			TemplateRef: TemplateName,
			Inputs:      videogenv1alpha1.TaskInputs{FaceImageURL: FaceURL},
			WebhookURL:  webhookURL,
		},
	}
}

// FaceURL is the face every benchmark task names (never fetched: the benchmark backends
// do no work).
const FaceURL = "https://media.example/face.jpg"

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Machine describes this machine for the report.
func Machine() string {
	model := "unknown CPU"
	if out, err := exec.Command("lscpu").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Model name:") {
				model = strings.TrimSpace(strings.TrimPrefix(l, "Model name:"))
			}
		}
	}
	nproc := "?"
	if out, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("nproc %s, %s, control plane: envtest kube-apiserver and etcd (%s), %s",
		nproc, model, testenv.KubernetesVersion, time.Now().UTC().Format(time.RFC3339))
}

// Bounded returns a context that ends after d, so that every program stops by itself.
func Bounded(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Profile writes a CPU profile of this process to path until the returned function is called
// ("" does nothing).
func Profile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
		return func() {}
	}
	_ = pprof.StartCPUProfile(f)
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// KubeProfile fetches a CPU profile of the kube-apiserver (its /debug/pprof endpoint) covering
// the next d, into path. Run it in a goroutine beside the load it should explain.
func (e *Env) KubeProfile(ctx context.Context, d time.Duration, path string) error {
	resp, err := e.kubeGet(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// kubeGet GETs path from the kube-apiserver as the admin, and fails on anything but 200.
func (e *Env) kubeGet(ctx context.Context, path string) (*http.Response, error) {
	hc, err := rest.HTTPClientFor(e.Cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.Cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("kube-apiserver %s: %s", path, resp.Status)
	}
	return resp, nil
}

// KubeRequests returns the kube-apiserver's request counts (apiserver_request_total) by
// "verb resource[/subresource]", summed over codes and scopes, and the watch events it sent
// (apiserver_watch_events_total, one per watcher) by resource: subtract two of them to see
// what a run asked of the control plane, reads and watches included.
func (e *Env) KubeRequests(ctx context.Context) (map[string]float64, error) {
	resp, err := e.kubeGet(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		events, isEvents := strings.CutPrefix(line, "apiserver_watch_events_total{")
		if !ok && !isEvents {
			continue
		}
		if isEvents {
			rest = events
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		l := promLabels(labels)
		if isEvents { // events sent to watchers, one per watcher
			out["watch events to watchers "+cmp.Or(l["resource"], l["kind"])] += v
			continue
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += v
	}
	return out, sc.Err()
}

// Reads is how many GETs and LISTs the kube-apiserver served between two KubeRequests.
func Reads(before, after map[string]float64) float64 {
	var n float64
	for k, v := range after {
		if strings.HasPrefix(k, "GET ") || strings.HasPrefix(k, "LIST ") {
			n += v - before[k]
		}
	}
	return n
}

// promLabels parses `a="x",b="y"` (values without escaped quotes, as these labels are).
func promLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		value, rest, _ := strings.Cut(rest, `"`)
		out[name] = value
		s = strings.TrimPrefix(rest, ",")
	}
	return out
}

// FinishedStatus is the status the manager leaves a task t with that succeeded on the bench
// backends (InstantBackend's handles) and was deducted at at: both stages, the result, the
// conditions, and closed if asked. Set t's namespace, name and UID first (a created task).
func FinishedStatus(t *videogenv1alpha1.VideoTask, closed bool, at time.Time) videogenv1alpha1.VideoTaskStatus {
	now := metav1.NewTime(at)
	handle := func(stage videogenv1alpha1.StageName) string {
		return "h-" + generation.WorkKey(t.Namespace, t.Name, string(t.UID), stage)
	}
	return videogenv1alpha1.VideoTaskStatus{
		Phase: videogenv1alpha1.TaskSucceeded, Cost: ptr.To[int64](TemplatePrice), Charge: videogenv1alpha1.ChargeDeducted,
		TemplateMediaURL: TemplateMediaURL,
		Closed:           closed,
		Progress:         100, StartedAt: &now, CompletedAt: &now, ObservedGeneration: 1,
		Result: &videogenv1alpha1.TaskResult{URL: "https://media.example/" + t.Name + ".mp4", MediaType: "video/mp4"},
		Stages: []videogenv1alpha1.StageStatus{
			{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Backend: "bench-backend", Handle: handle(videogenv1alpha1.StageAnalyze),
				Progress: 100, StartedAt: &now, CompletedAt: &now, Outputs: map[string]string{"faces": "1"}},
			{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageSucceeded, Backend: "bench-backend", Handle: handle(videogenv1alpha1.StageRender),
				Progress: 100, StartedAt: &now, CompletedAt: &now},
		},
		Conditions: []metav1.Condition{
			{Type: videogenv1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: videogenv1alpha1.ReasonFrozen, Message: "Froze 10 points", LastTransitionTime: now},
			{Type: videogenv1alpha1.ConditionDispatched, Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: videogenv1alpha1.ReasonBackendAccepted, Message: "bench-backend accepted the render stage", LastTransitionTime: now},
			{Type: videogenv1alpha1.ConditionSucceeded, Status: metav1.ConditionTrue, ObservedGeneration: 1, Reason: videogenv1alpha1.ReasonSucceeded, Message: "Generation finished", LastTransitionTime: now},
		},
	}
}

// PrintRequests prints the kube-apiserver requests between two KubeRequests samples, by verb
// and resource, most first, and per item (task).
func PrintRequests(w io.Writer, before, after map[string]float64, items int) {
	type row struct {
		key string
		n   float64
	}
	var rows []row
	for k, v := range after {
		if d := v - before[k]; d >= 1 {
			rows = append(rows, row{k, d})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.n, a.n) })
	fmt.Fprintln(w, "| verb resource | requests | per task |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.0f | %.2f |\n", r.key, r.n, r.n/float64(items))
	}
}
