// Command worker is the reference generation backend: it speaks the HTTP backend protocol
// (docs/backend-protocol.md) and renders every capability on this machine with ffmpeg, ffprobe
// and facedetect, storing results in a local blob directory it serves itself. `worker job` runs
// one stage instead, as a Kubernetes Job's pod for the Job backend (docs/job-backend.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
)

func main() {
	// `worker job`: one stage in a Kubernetes Job's pod, for the Job backend (docs/job-backend.md).
	if len(os.Args) > 1 && os.Args[1] == "job" {
		os.Exit(runJob(os.Args[2:], os.Getenv, os.Stderr))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := defaults()
	flag.StringVar(&cfg.BindAddress, "bind-address", cfg.BindAddress, "Address the protocol, /v1/blobs/ and /healthz listen on.")
	cfg.bindStageFlags(flag.CommandLine)
	flag.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "Stages that run at once; more wait in a queue.")
	flag.IntVar(&cfg.MaxQueued, "max-queued", cfg.MaxQueued, "Stages that may wait; beyond that submissions get 503 busy.")
	flag.IntVar(&cfg.MaxPerAccount, "max-per-account", cfg.MaxPerAccount, "Stages of one account (the task's namespace) that may run or wait at once; beyond that its submissions get 503 busy while other accounts' are taken. 0: no bound but --max-queued's. A free slot goes to the account running the fewest.")
	flag.StringVar(&cfg.Token, "token", cfg.Token, "Bearer token the protocol endpoints require (default $VIDEOGEN_WORKER_TOKEN; prefer it or --token-file: flags show in ps).")
	flag.StringVar(&cfg.TokenFile, "token-file", cfg.TokenFile, "File holding the bearer token the protocol endpoints require.")
	flag.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", cfg.InsecureNoAuth, "Serve /v1/stages without a token, for a worker nothing else can reach (local use only).")
	cfg.Timeouts.Bind(flag.CommandLine)
	flag.DurationVar(&cfg.ResultTTL, "result-ttl", cfg.ResultTTL, "How long a finished stage's status is kept (its result stays in the blob store).")
	flag.Usage = usage(flag.CommandLine)
	flag.Parse()
	if err := noArguments(flag.CommandLine); err != nil {
		return err
	}
	if err := cfg.Timeouts.Check(); err != nil {
		return err
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for _, bin := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found on PATH (apt-get install ffmpeg): %w", bin, err)
		}
	}
	if _, err := exec.LookPath(cfg.FaceDetect); err != nil {
		log.Warn("facedetect not found: video.short and image.pose stages will fail (apt-get install facedetect)", "command", cfg.FaceDetect)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := newWorker(ctx, cfg, log)
	if err != nil {
		return err
	}
	srv := httpserver.New(cfg.BindAddress, w.handler, cfg.Timeouts)
	errc := make(chan error, 1)
	go func() { errc <- httpserver.ListenAndServe(srv) }()
	log.Info("worker listening", "address", cfg.BindAddress, "public-url", cfg.PublicURL, "blob-store", cfg.Blobs.Kind, "auth", !cfg.InsecureNoAuth)
	if cfg.InsecureNoAuth {
		log.Warn("--insecure-no-auth: anyone who reaches this port can run stages")
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: running stages are cancelled")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	w.table.Wait() // ctx is done, so every stage's ffmpeg has been killed
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// usage says that the worker has two ways to run (`--help` used to list the server's flags
// alone, and `worker job` was nowhere to be seen).
func usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprint(fs.Output(), `Usage:
  worker [flags]        serve the backend protocol (docs/backend-protocol.md) and the results
  worker job [flags]    run one stage in a Kubernetes Job's pod, for the Job backend
                        (docs/job-backend.md; worker job --help lists its flags)

Flags of the server:
`)
		fs.PrintDefaults()
	}
}

// noArguments refuses words after the flags: `worker jobs` or `worker help` would otherwise
// start a server that ignores them.
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the server takes only flags, and the one subcommand, job, comes first (worker --help)", fs.Arg(0))
	}
	return nil
}
