package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/blobstore"
	"github.com/videogen-dev/videogen-operator/netguard"
	"github.com/videogen-dev/videogen-operator/worker/capability"
	"github.com/videogen-dev/videogen-operator/worker/face"
	"github.com/videogen-dev/videogen-operator/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/worker/jobs"
	"github.com/videogen-dev/videogen-operator/worker/server"
)

// config is the worker's flags.
type config struct {
	BindAddress, PublicURL     string
	Blobs                      blobstore.Flags
	AllowPrivateURLs           string
	MaxConcurrent, MaxQueued   int
	MaxInputBytes              int64
	FetchTimeout, ResultTTL    time.Duration
	Token, FaceDetect, TempDir string
}

func defaults() config {
	return config{
		BindAddress:   ":8080",
		PublicURL:     "http://localhost:8080",
		Blobs:         blobstore.Flags{Kind: "dir", Dir: "/var/lib/videogen/worker-blobs"},
		MaxConcurrent: 2,
		MaxQueued:     64,
		MaxInputBytes: 200 << 20,
		FetchTimeout:  2 * time.Minute,
		ResultTTL:     time.Hour,
		Token:         os.Getenv("VIDEOGEN_WORKER_TOKEN"),
		FaceDetect:    "facedetect",
	}
}

// blobsPath is where the worker serves its results.
const blobsPath = "/v1/blobs/"

// worker is the assembled service.
type worker struct {
	handler http.Handler
	table   *jobs.Table
}

// newWorker wires the protocol server, the stage table and the blob store; stages stop when
// ctx ends.
func newWorker(ctx context.Context, cfg config, log *slog.Logger) (*worker, error) {
	allow, err := netguard.ParseAllowList(cfg.AllowPrivateURLs)
	if err != nil {
		return nil, fmt.Errorf("--allow-private-urls: %w", err)
	}
	if cfg.MaxInputBytes <= 0 || cfg.FetchTimeout <= 0 {
		return nil, fmt.Errorf("--max-input-bytes and --fetch-timeout must be positive")
	}
	blobs, err := cfg.Blobs.Open(strings.TrimSuffix(cfg.PublicURL, "/") + blobsPath)
	if err != nil {
		return nil, err
	}
	pipelines := capability.New(capability.Deps{
		Fetcher: fetcher.New(netguard.Policy{Allow: allow}, cfg.MaxInputBytes, cfg.FetchTimeout),
		Store:   blobs,
		Faces:   face.CLI{Path: cfg.FaceDetect},
		TempDir: cfg.TempDir,
	})
	table := jobs.New(ctx, jobs.Config{MaxConcurrent: cfg.MaxConcurrent, MaxQueued: cfg.MaxQueued, TTL: cfg.ResultTTL})

	mux := http.NewServeMux()
	if dir, ok := blobs.(*blobstore.Dir); ok {
		// Results in a bucket are fetched from the bucket; in a directory, from here.
		mux.Handle(blobsPath, dir.Handler(blobsPath))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	api := server.New(pipelines, table, cfg.Token, log).Handler()
	mux.Handle("/v1/stages", api)
	mux.Handle("/v1/stages/", api)
	return &worker{handler: mux, table: table}, nil
}
