package localstack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

func TestExtraArgsEndTheirComponentsCommandLines(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), APIAddress: "127.0.0.1:18080", MoreAPIAddresses: []string{"127.0.0.1:18081"},
		ManagerArgs: []string{"--payment-event-sinks=sinks.yaml", "--task-timeout=5m"}, APIArgs: []string{"--rate-limit=5"}}
	cfg.defaults()
	s := &Stack{cfg: cfg, APIURLs: []string{"http://127.0.0.1:18080", "http://127.0.0.1:18081"}}
	got := map[string][]string{}
	for _, c := range s.commands(wiring{ledgerAddr: "127.0.0.1:18084"}) {
		got[c.name] = c.args()
	}
	for name, want := range map[string][]string{"manager": cfg.ManagerArgs, "apiserver": cfg.APIArgs, "apiserver-2": cfg.APIArgs} {
		args := got[name]
		if len(args) <= len(want) || !slices.Equal(args[len(args)-len(want):], want) {
			t.Errorf("%s's command line %q should end with %q", name, args, want)
		}
	}
	if worker := strings.Join(got["worker"], " "); strings.Contains(worker, "rate-limit") || strings.Contains(worker, "sinks") {
		t.Errorf("the worker's command line took another component's flags: %s", worker)
	}
}

func TestStartRefusesABadExtraFlagBeforeStartingAnything(t *testing.T) {
	binDir := buildComponents(t)
	for _, tc := range []struct {
		name             string
		managerArgs, api []string
		want             string
	}{
		{"unknown manager flag", []string{"--task-timeout=5m", "--no-such-flag=1"}, nil,
			"manager refuses the flags --task-timeout=5m --no-such-flag=1: flag provided but not defined: -no-such-flag"},
		{"unparsable manager value", []string{"--task-timeout=soon"}, nil,
			`manager refuses the flags --task-timeout=soon: invalid value "soon" for flag -task-timeout`},
		{"unknown apiserver flag", nil, []string{"--payment-event-sinks=sinks.yaml"},
			"apiserver refuses the flags --payment-event-sinks=sinks.yaml: flag provided but not defined: -payment-event-sinks"},
		// Without its =value the flag would take the next argument, --help, as its value.
		{"flag without =value", []string{"--payment-event-sinks"}, nil,
			`manager flag "--payment-event-sinks": give each flag whole, as --name=value`},
		{"not a flag", nil, []string{"5"}, `apiserver flag "5": give each flag whole`},
		{"a flag the stack sets", []string{"--metrics-bind-address=:8443"}, nil,
			"videogen-local sets --metrics-bind-address itself, to wire the stack together; use videogen-local's --manager-metrics-address"},
		{"the stack's kubeconfig", nil, []string{"-kubeconfig=/tmp/other"}, "videogen-local sets --kubeconfig itself"},
		{"help", []string{"--help=true"}, nil, "run " + filepath.Join(binDir, "manager") + " --help to list its flags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := t.TempDir()
			s, err := Start(context.Background(), Config{DataDir: dataDir, BinDir: binDir, ManagerArgs: tc.managerArgs, APIArgs: tc.api})
			if err == nil {
				s.Stop()
				t.Fatalf("Start took %q and %q", tc.managerArgs, tc.api)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start's error %q should say %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "etcd")); err == nil {
				t.Error("the control plane was started before the flags were checked")
			}
		})
	}
	t.Run("good flags pass", func(t *testing.T) {
		s := &Stack{cfg: Config{BinDir: binDir, ManagerArgs: []string{"--payment-event-sinks=sinks.yaml", "--leader-elect=false", "-zap-log-level=debug"},
			APIArgs: []string{"--rate-limit=5"}}, APIURLs: []string{"http://127.0.0.1:18080"}}
		if err := s.checkArgs(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// buildComponents builds the manager and the apiserver, whose flag parsing judges extra flags.
func buildComponents(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"manager", "apiserver"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	return dir
}

// Ctrl-C stops `make run` at once: the stack runs its apiservers with --shutdown-delay=0, so
// SIGTERM from Stop closes their listeners as before the drain, instead of each replica
// serving on for the 5s a cluster's endpoints need (nothing routes to a local process but
// its own address), one replica after another.
func TestTheStacksAPIServersStopWithoutADrain(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), APIAddress: "127.0.0.1:18080", MoreAPIAddresses: []string{"127.0.0.1:18081"}}
	cfg.defaults()
	s := &Stack{cfg: cfg, APIURLs: []string{"http://127.0.0.1:18080", "http://127.0.0.1:18081"}}
	apiservers := 0
	for _, c := range s.commands(wiring{}) {
		if !strings.HasPrefix(c.name, "apiserver") {
			continue
		}
		apiservers++
		if !slices.Contains(c.args(), "--shutdown-delay=0") {
			t.Errorf("%s runs without --shutdown-delay=0: %q", c.name, c.args())
		}
	}
	if apiservers != 2 {
		t.Errorf("%d apiserver command lines, want 2", apiservers)
	}
}

// The manager prices kubectl's tasks and the apiserver the REST API's, each with its own
// --default-price: given to one of them alone, an eraser task cost 25 with kubectl and 10 over
// REST, and GET /v1/templates said 10 while kubectl get templates said 25. The stack sets it on
// both (videogen-local's --default-price), as the chart's defaultPrice does, and refuses it as
// one component's flag.
func TestTheDefaultPriceIsOneValueForTheManagerAndTheAPIServer(t *testing.T) {
	price := int64(25)
	cfg := Config{DataDir: t.TempDir(), MoreAPIAddresses: []string{"127.0.0.1:18081"}, DefaultPrice: &price}
	cfg.defaults()
	s := &Stack{cfg: cfg, APIURLs: []string{"http://127.0.0.1:18080", "http://127.0.0.1:18081"}}
	for _, c := range s.commands(wiring{}) {
		if c.name == "worker" {
			continue
		}
		if !slices.Contains(c.own, "--default-price=25") {
			t.Errorf("%s's command line %q does not price at the stack's default price, 25", c.name, c.own)
		}
	}
	for _, args := range []Config{{ManagerArgs: []string{"--default-price=25"}}, {APIArgs: []string{"--default-price=25"}}} {
		s := &Stack{cfg: Config{BinDir: t.TempDir(), ManagerArgs: args.ManagerArgs, APIArgs: args.APIArgs}, APIURLs: []string{"http://127.0.0.1:18080"}}
		err := s.checkArgs(context.Background())
		if err == nil || !strings.Contains(err.Error(), "use videogen-local's --default-price") {
			t.Errorf("--default-price for one component (manager %q, apiserver %q): %v, want it refused, naming videogen-local's --default-price",
				args.ManagerArgs, args.APIArgs, err)
		}
	}
}

// A backend author routes a capability to their own server on the local stack with
// videogen-local's --backends-config: the stack refused the manager's flag as its own (it
// wires the reference worker with it) and offered nothing else, so the only way was to edit
// the file it writes and kill the manager under --restart.
func TestTheManagerReadsTheUsersBackendsConfig(t *testing.T) {
	dataDir := t.TempDir()
	mine := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(mine, []byte("backends: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dataDir, BackendsConfig: mine}
	cfg.defaults()
	s := &Stack{cfg: cfg, WorkerURL: "http://127.0.0.1:8090"}
	got, err := s.backendsConfig(filepath.Join(dataDir, "worker-token"))
	if err != nil || got != mine {
		t.Fatalf("backendsConfig = %q, %v; want the user's %q", got, err, mine)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "backends.yaml")); err == nil {
		t.Error("the stack wrote its own backends.yaml although the user gave one (the user's may be that very file)")
	}
	if args := strings.Join(s.commands(wiring{backends: got})[1].args(), " "); !strings.Contains(args, "--backends-config="+mine) {
		t.Errorf("the manager's command line does not name the user's file: %s", args)
	}

	s.cfg.BackendsConfig = ""
	got, err = s.backendsConfig(filepath.Join(dataDir, "worker-token"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(got); err != nil || !strings.Contains(string(b), "url: http://127.0.0.1:8090") {
		t.Errorf("without a file of the user's, the stack's own routes to the reference worker: %q, %v", b, err)
	}

	refused := &Stack{cfg: Config{BinDir: t.TempDir(), ManagerArgs: []string{"--backends-config=" + mine}}, APIURLs: []string{"http://127.0.0.1:18080"}}
	if err := refused.checkArgs(context.Background()); err == nil || !strings.Contains(err.Error(), "use videogen-local's --backends-config") {
		t.Errorf("--manager-arg=--backends-config: %v, want it refused, naming videogen-local's --backends-config", err)
	}

	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if st, err := Start(context.Background(), Config{DataDir: dataDir, BinDir: t.TempDir(), BackendsConfig: missing}); err == nil {
		st.Stop()
		t.Fatal("Start took a --backends-config file that does not exist")
	} else if !strings.Contains(err.Error(), missing) {
		t.Errorf("Start's error %q should name the missing file", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "etcd")); err == nil {
		t.Error("the control plane was started before the backends config was checked")
	}
}
