package localstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Config says where the stack keeps its data and binaries, and where it listens.
type Config struct {
	// DataDir keeps etcd's data, the kubeconfig, logs, media and the demo key (default .run).
	DataDir string
	// BinDir holds the manager, apiserver and worker binaries (default bin).
	BinDir string
	// APIAddress, WorkerAddress: loopback host:port of the REST API and the worker.
	APIAddress string
	// MoreAPIAddresses start more REST apiserver replicas (apiserver-2, apiserver-3, …) on these
	// addresses, beside the first; all ask the one ledger in the manager.
	MoreAPIAddresses []string
	WorkerAddress    string
	// DemoPoints is the demo account's initial balance.
	DemoPoints int64
	// Backend, if set, is the base URL of the generation backend that serves every capability
	// instead of the reference worker, which is then not started (tests' fault-injecting
	// backends). It must answer GET /healthz with 200.
	Backend string
	// BackendsConfig, if set, is a --backends-config file of the user's that the manager reads
	// instead of the one the stack writes (every capability on the reference worker): to route
	// a capability to a backend of one's own (docs/backend-protocol.md, Routing). The
	// reference worker still runs, for the entries that name it (its url is WorkerURL, its
	// token in <DataDir>/worker-token).
	BackendsConfig string
	// ManagerMetricsAddress, APIMetricsAddress: where the manager and the (first) REST apiserver
	// serve Prometheus metrics, over plain HTTP on this machine; empty serves none.
	ManagerMetricsAddress, APIMetricsAddress string
	// ManagerArgs and APIArgs are more flags of the manager and of every REST apiserver replica,
	// each written --name=value (videogen-local's --manager-arg, --apiserver-arg). Start refuses,
	// before it starts anything, a flag the binary does not accept or one the stack sets itself.
	ManagerArgs, APIArgs []string
	// DefaultPrice is the system default price of the manager (kubectl's tasks) and of every
	// REST apiserver replica (REST tasks, GET /v1/templates), one value for all, as the chart's
	// defaultPrice: nil leaves the binaries' default (10).
	DefaultPrice *int64
	// Timeouts, if set, are the read deadlines of the apiserver's and the worker's listeners
	// (their defaults otherwise); tests shorten them to see slow clients cut off.
	Timeouts httpserver.Timeouts
	// Log receives progress lines.
	Log io.Writer
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = ".run"
	}
	if c.BinDir == "" {
		c.BinDir = "bin"
	}
	if c.APIAddress == "" {
		c.APIAddress = "127.0.0.1:8080"
	}
	if c.WorkerAddress == "" {
		c.WorkerAddress = "127.0.0.1:8090"
	}
	if c.DemoPoints == 0 {
		c.DemoPoints = 1000
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Stack is a running local service.
type Stack struct {
	cfg        Config
	env        *envtest.Environment
	rest       *rest.Config
	Client     client.Client
	Kubeconfig string
	// APIURL is the REST API's base URL; DemoKey the demo account's API key.
	APIURL string
	// APIURLs are the base URLs of every REST apiserver replica, APIURL first.
	APIURLs   []string
	WorkerURL string
	DemoKey   string
	// EventServiceToken is a service token for the EventService.Handle RPC on the API port.
	EventServiceToken string
	// WorkerToken is the reference worker's bearer token (the manager reads it from a file).
	WorkerToken string
	Demo        Demo
	procs       []*process
}

// Start brings the stack up; Stop takes it down. A second Start with the same DataDir reuses
// the data (accounts, tasks, the demo key).
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	cfg.defaults()
	if cfg.BackendsConfig != "" {
		// Refused now rather than as a manager that exits once the control plane runs.
		if _, err := os.Stat(cfg.BackendsConfig); err != nil {
			return nil, fmt.Errorf("--backends-config: %w", err)
		}
	}
	for _, p := range []*string{&cfg.DataDir, &cfg.BinDir, &cfg.BackendsConfig} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	if err := checkDataDirFree(cfg.DataDir); err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, APIURL: "http://" + cfg.APIAddress, WorkerURL: "http://" + cfg.WorkerAddress}
	for _, addr := range append([]string{cfg.APIAddress}, cfg.MoreAPIAddresses...) {
		s.APIURLs = append(s.APIURLs, "http://"+addr)
	}
	if cfg.Backend != "" {
		s.WorkerURL = strings.TrimSuffix(cfg.Backend, "/")
	}
	if err := s.checkArgs(ctx); err != nil {
		return nil, err
	}
	// Installed before the control plane starts: its processes are in process groups of their
	// own, which no Ctrl-C reaches, so a start that fails anywhere after env.Start (the
	// kubeconfig, the policies) must stop them, or they outlive videogen-local.
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := s.startControlPlane(); err != nil {
		return nil, err
	}
	if err := s.seed(ctx); err != nil {
		return nil, fmt.Errorf("seeding: %w", err)
	}
	if err := s.startProcesses(ctx); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Stack) logf(format string, args ...any) { fmt.Fprintf(s.cfg.Log, format+"\n", args...) }

func (s *Stack) path(parts ...string) string {
	return filepath.Join(append([]string{s.cfg.DataDir}, parts...)...)
}

func (s *Stack) startControlPlane() error {
	env, err := testenv.New()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.path("etcd"), 0o700); err != nil {
		return err
	}
	// A data dir we choose is kept by envtest, so a second run finds its objects again.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: s.path("etcd")}
	s.logf("starting the control plane (etcd data in %s)", s.path("etcd"))
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	s.env, s.rest = env, cfg
	user, err := env.AddUser(envtest.User{Name: "videogen-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	s.Kubeconfig = s.path("kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	if s.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	return testenv.InstallPolicies(context.Background(), s.Client)
}

// waitReady waits until the API answers the demo key and the worker its health check.
func (s *Stack) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := s.checkProcesses(); err != nil {
			return err
		}
		if s.ready(ctx) {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the stack did not become ready within 60s; see the logs in " + s.path("logs"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ready: the worker is healthy, the API knows the demo key, and the manager has credited the
// demo account's welcome top-up (so the first request a newcomer sends can be paid for).
func (s *Stack) ready(ctx context.Context) bool {
	probes := []struct{ url, key string }{{s.WorkerURL + "/healthz", ""}}
	for _, u := range s.APIURLs {
		probes = append(probes, struct{ url, key string }{u + "/v1/balance", s.DemoKey})
	}
	for _, probe := range probes {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, probe.url, nil)
		if probe.key != "" {
			req.Header.Set("Authorization", "Bearer "+probe.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		var b struct {
			Credited int64 `json:"credited"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (probe.key != "" && b.Credited == 0) {
			return false
		}
	}
	return true
}

// Stop ends the processes (SIGTERM, then SIGKILL after a grace period) and the control plane.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop(10 * time.Second)
	}
	if s.env != nil {
		if err := s.env.Stop(); err != nil {
			s.logf("stopping the control plane: %v", err)
		}
	}
}
