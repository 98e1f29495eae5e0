// Command videogen-local runs the whole service on this machine (`make run`): control plane,
// manager, REST apiserver and reference worker, seeded with demo data. Ctrl-C stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// flags are videogen-local's command line, in a flag set of its own: controller-runtime
// registers --kubeconfig on the global one, and the stack makes its own kubeconfig.
func flags(cfg *localstack.Config) (fs *flag.FlagSet, restart *bool) {
	flag := flag.NewFlagSet("videogen-local", flag.ExitOnError)
	flag.StringVar(&cfg.DataDir, "data-dir", ".run", "Where etcd's data, logs, media, the kubeconfig and the demo key are kept.")
	flag.StringVar(&cfg.BinDir, "bin-dir", "", "Where the manager, apiserver and worker binaries are (make build-all; default: the repository's bin).")
	flag.StringVar(&cfg.APIAddress, "api-address", "127.0.0.1:8080", "Address of the REST API.")
	flag.StringVar(&cfg.WorkerAddress, "worker-address", "127.0.0.1:8090", "Address of the reference worker.")
	flag.StringVar(&cfg.BackendsConfig, "backends-config", "", "The manager's --backends-config `file`, to route capabilities to a backend of your own (docs/backend-protocol.md, Routing) instead of the stack's, which routes every capability to the reference worker (url http://<--worker-address>, token in <data-dir>/worker-token; copy <data-dir>/backends.yaml to start from it).")
	cfg.DemoPoints = 1000
	flag.Func("demo-points", "The demo account's first top-up in `points`, 1 to 1000000000 (1000 if not given).",
		func(v string) error {
			points, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return err
			}
			// The top-up's own bounds: below 1 it would be no credit (a negative amount is a
			// debit, refused on the new account's 0 points, leaving the demo account empty
			// without a word), above the CRD's maximum the seeding fails once the control plane runs.
			if points < 1 || points > videogenv1alpha1.MaxPoints {
				return fmt.Errorf("--demo-points must be from 1 to %d (what one top-up can credit), not %d", videogenv1alpha1.MaxPoints, points)
			}
			cfg.DemoPoints = points
			return nil
		})
	flag.Func("default-price", "System default price in `points` (10 if not given), of the manager's and the REST apiserver's alike: what an eraser task, a custom short template and a duration without an entry cost.",
		func(v string) error {
			price, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return err
			}
			// Checked here, as the manager and the apiserver check it: a price they refuse
			// would otherwise stop the stack only once the control plane and both had started.
			if err := pricing.CheckDefault(price); err != nil {
				return err
			}
			cfg.DefaultPrice = &price
			return nil
		})
	flag.StringVar(&cfg.ManagerMetricsAddress, "manager-metrics-address", "", "Serve the manager's Prometheus metrics over HTTP here (e.g. 127.0.0.1:8443); none if empty.")
	flag.StringVar(&cfg.APIMetricsAddress, "api-metrics-address", "", "Serve the REST apiserver's Prometheus metrics over HTTP here (e.g. 127.0.0.1:9090); none if empty. Only the replica of --api-address serves them: those of --more-api-address serve none.")
	flag.Var((*flagList)(&cfg.MoreAPIAddresses), "more-api-address",
		"Run one more REST apiserver replica here (repeat for more), beside --api-address: all ask the manager's one ledger, as replicas behind a Service do.")
	restart = flag.Bool("restart", false,
		"Restart a component that exits (or is killed), after a backoff, as its Deployment would, instead of stopping everything: for practising the kill -9 drills of docs/reliability.md.")
	flag.Var((*flagList)(&cfg.ManagerArgs), "manager-arg",
		"One more flag for the manager, written `--name=value` (repeat for more; bin/manager --help lists them), e.g. --manager-arg=--payment-event-sinks=sinks.yaml.")
	flag.Var((*flagList)(&cfg.APIArgs), "apiserver-arg",
		"One more flag for the REST apiserver, written `--name=value` (repeat for more; bin/apiserver --help lists them), e.g. --apiserver-arg=--rate-limit=5.")
	flag.Usage = func() {
		fmt.Fprintf(flag.Output(), `Usage: videogen-local [flags]   (make run RUN_ARGS="flags")

Runs the whole service on this machine: control plane, manager, REST apiserver and reference
worker, seeded with demo data. Ctrl-C stops it; so does a component that exits (its log's
end is printed), unless --restart restarts it as a Deployment would. A flag given to the
manager or the apiserver with --manager-arg / --apiserver-arg is checked before anything
starts: one the binary does not accept, or one videogen-local sets itself, is refused.

Flags:
`)
		flag.PrintDefaults()
	}
	return flag, restart
}

func main() {
	var cfg localstack.Config
	fs, restart := flags(&cfg)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: a bad flag exits 2 with the usage
	cfg.Log = os.Stderr
	// The stack installs the CRDs from the repository's config/ and runs the control plane from
	// its bin/k8s, found from the working directory up: so are the binaries, by default.
	root, err := testenv.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "videogen-local: run it inside the videogen-operator repository (make run): it takes the CRDs from config/ and the binaries from bin/")
		os.Exit(1)
	}
	if cfg.BinDir == "" {
		cfg.BinDir = filepath.Join(root, "bin")
	}

	for _, addr := range append([]string{cfg.APIAddress, cfg.WorkerAddress, cfg.ManagerMetricsAddress, cfg.APIMetricsAddress}, cfg.MoreAPIAddresses...) {
		if addr == "" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "videogen-local: %s is taken (%v); choose others with the --…-address flags\n", addr, err)
			os.Exit(1)
		}
		l.Close()
	}
	// SIGHUP too: closing the terminal (or a dropped SSH session) must stop the stack as Ctrl-C
	// does. The components run in process groups of their own and get no signal of the
	// terminal's; killed by Go's default for SIGHUP, the launcher would leave them all running.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	s, err := localstack.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "videogen-local:", err)
		os.Exit(1)
	}
	fmt.Println(s.Banner())
	if *restart {
		s.Supervise(ctx)
	} else {
		err = s.Wait(ctx)
	}
	fmt.Fprintln(os.Stderr, "\nstopping…")
	s.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "videogen-local:", err)
		os.Exit(1)
	}
}

// flagList is a repeatable string flag: each use adds one value.
type flagList []string

func (l *flagList) String() string { return strings.Join(*l, " ") }

func (l *flagList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
