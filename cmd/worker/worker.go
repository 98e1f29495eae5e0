package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/netguard"
	"github.com/videogen-dev/videogen-operator/internal/worker/capability"
	"github.com/videogen-dev/videogen-operator/internal/worker/face"
	"github.com/videogen-dev/videogen-operator/internal/worker/fetcher"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/server"
)

// config is the worker's flags.
type config struct {
	BindAddress, PublicURL string
	Blobs                  blobstore.Flags
	AllowPrivateURLs       string
	// AllowPrivateServiceMedia: where the service's own media may be (see pipelines).
	AllowPrivateServiceMedia string
	MaxConcurrent, MaxQueued int
	MaxPerAccount            int
	MaxInputBytes            int64
	FetchTimeout, ResultTTL  time.Duration
	// FetchMinRate is the slowest an input's body may arrive (0 bytes: any).
	FetchMinRate               fetcher.MinRate
	Token, FaceDetect, TempDir string
	// TokenFile holds the token instead of Token (a mounted Secret, the local stack's file).
	TokenFile string
	// InsecureNoAuth serves /v1/stages to anyone: only where nothing else can reach the port.
	InsecureNoAuth bool
	Timeouts       httpserver.Timeouts
}

func defaults() config {
	return config{
		BindAddress:   ":8080",
		PublicURL:     "http://localhost:8080",
		Blobs:         blobstore.Flags{Kind: "dir", Dir: "/var/lib/videogen/worker-blobs"},
		MaxConcurrent: 2,
		MaxQueued:     64,
		MaxPerAccount: 16,
		MaxInputBytes: 200 << 20,
		FetchTimeout:  2 * time.Minute,
		FetchMinRate:  fetcher.DefaultMinRate,
		ResultTTL:     time.Hour,
		Token:         os.Getenv("VIDEOGEN_WORKER_TOKEN"),
		FaceDetect:    "facedetect",
		Timeouts:      httpserver.DefaultTimeouts(),
	}
}

// auth is who may call /v1/stages: the holders of the token, or anyone with --insecure-no-auth.
// Without either the worker does not start, rather than serve everyone by omission.
func (cfg config) auth() (server.Auth, error) {
	// A Secret made from a file carries its newline into $VIDEOGEN_WORKER_TOKEN; the manager
	// trims its tokenFile, so both sides compare the same token.
	token := strings.TrimSpace(cfg.Token)
	if cfg.TokenFile != "" {
		if token != "" {
			return server.Auth{}, errors.New("set the token once: --token (or $VIDEOGEN_WORKER_TOKEN) or --token-file, not both")
		}
		raw, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return server.Auth{}, fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(raw)); token == "" {
			return server.Auth{}, fmt.Errorf("--token-file %s is empty", cfg.TokenFile)
		}
	}
	switch {
	case cfg.InsecureNoAuth && token != "":
		return server.Auth{}, errors.New("--insecure-no-auth and a token contradict each other: drop one")
	case cfg.InsecureNoAuth:
		return server.Auth{Disabled: true}, nil
	case token == "":
		return server.Auth{}, errors.New("no bearer token for /v1/stages: set $VIDEOGEN_WORKER_TOKEN or --token-file " +
			"(the manager sends it from tokenFile in its backends config), or pass --insecure-no-auth where nothing else can reach this worker")
	case len(token) < bearer.MinTokenBytes:
		// /v1/stages fetches URLs and fills the disk: a short token is guessed by whoever reaches the port.
		return server.Auth{}, fmt.Errorf("a bearer token of %d bytes; it must be at least %d (e.g. openssl rand -hex 32)", len(token), bearer.MinTokenBytes)
	}
	if err := bearer.Check(token); err != nil {
		return server.Auth{}, err
	}
	return server.Auth{Token: token}, nil
}

// bindStageFlags binds the flags of what a stage uses, which `worker job` shares.
func (cfg *config) bindStageFlags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.PublicURL, "public-url", cfg.PublicURL, "Base URL under which this worker is reachable; with --blob-store=dir, result URLs are <public-url>/v1/blobs/<name>.")
	cfg.Blobs.Bind(fs, "rendered results", cfg.Blobs.Dir, "results/")
	fs.StringVar(&cfg.AllowPrivateURLs, "allow-private-urls", cfg.AllowPrivateURLs, "Comma-separated CIDRs that every input URL, the caller's included, may reach although they are not public (e.g. 127.0.0.0/8 for a local stack).")
	fs.StringVar(&cfg.AllowPrivateServiceMedia, "allow-private-service-media", cfg.AllowPrivateServiceMedia, "Comma-separated CIDRs that only the service's own media may be fetched from although they are not public: faces uploaded through the REST API and official Templates' media (e.g. the cluster's Service CIDR). The caller's URLs (a face or video by URL, a short template's target_url) may not reach them.")
	fs.Int64Var(&cfg.MaxInputBytes, "max-input-bytes", cfg.MaxInputBytes, "Largest input file fetched.")
	fs.DurationVar(&cfg.FetchTimeout, "fetch-timeout", cfg.FetchTimeout, "Time limit of one input download, its attempts included (a transient failure is tried again: 4 attempts within about 15 s).")
	fs.Int64Var(&cfg.FetchMinRate.Bytes, "fetch-min-rate-bytes", cfg.FetchMinRate.Bytes, "Least an input's body must bring in every --fetch-min-rate-window once its headers arrived; a slower source fails the stage without another attempt. 0: no minimum.")
	fs.DurationVar(&cfg.FetchMinRate.Window, "fetch-min-rate-window", cfg.FetchMinRate.Window, "The window of --fetch-min-rate-bytes.")
	fs.StringVar(&cfg.FaceDetect, "facedetect", cfg.FaceDetect, "The facedetect command (Debian package facedetect).")
}

// pipelines builds the stages' work over the blob store the flags chose, which it returns too.
func (cfg config) pipelines() (*capability.Pipelines, blobstore.Store, error) {
	allow, err := netguard.ParseAllowList(cfg.AllowPrivateURLs)
	if err != nil {
		return nil, nil, fmt.Errorf("--allow-private-urls: %w", err)
	}
	serviceMedia, err := netguard.ParseAllowList(cfg.AllowPrivateServiceMedia)
	if err != nil {
		return nil, nil, fmt.Errorf("--allow-private-service-media: %w", err)
	}
	if cfg.MaxInputBytes <= 0 || cfg.FetchTimeout <= 0 {
		return nil, nil, fmt.Errorf("--max-input-bytes and --fetch-timeout must be positive")
	}
	if cfg.FetchMinRate.Bytes < 0 || cfg.FetchMinRate.Bytes > 0 && cfg.FetchMinRate.Window <= 0 {
		return nil, nil, fmt.Errorf("--fetch-min-rate-bytes must be 0 (no minimum) or positive with a positive --fetch-min-rate-window")
	}
	blobs, err := cfg.Blobs.Open(strings.TrimSuffix(cfg.PublicURL, "/") + blobsPath)
	if err != nil {
		return nil, nil, err
	}
	minRate := fetcher.WithMinRate(cfg.FetchMinRate)
	return capability.New(capability.Deps{
		Fetcher: fetcher.New(netguard.Policy{Allow: allow}, cfg.MaxInputBytes, cfg.FetchTimeout, minRate),
		// Whatever a caller's URL may reach, the service's media may too.
		ServiceFetcher: fetcher.New(netguard.Policy{Allow: append(serviceMedia, allow...)}, cfg.MaxInputBytes, cfg.FetchTimeout, minRate),
		Store:          blobs,
		Faces:          face.CLI{Path: cfg.FaceDetect},
		TempDir:        cfg.TempDir,
	}), blobs, nil
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
	auth, err := cfg.auth()
	if err != nil {
		return nil, err
	}
	pipelines, blobs, err := cfg.pipelines()
	if err != nil {
		return nil, err
	}
	table := jobs.New(ctx, jobs.Config{MaxConcurrent: cfg.MaxConcurrent, MaxQueued: cfg.MaxQueued, MaxPerOwner: cfg.MaxPerAccount, TTL: cfg.ResultTTL, Log: log})

	mux := http.NewServeMux()
	if dir, ok := blobs.(*blobstore.Dir); ok {
		// Results in a bucket are fetched from the bucket; in a directory, from here.
		mux.Handle(blobsPath, dir.Handler(blobsPath))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	api := server.New(pipelines, table, auth, log).Handler()
	mux.Handle("/v1/stages", api)
	mux.Handle("/v1/stages/", api)
	// Every other path: a 404 in the error envelope, not net/http's text (nor, for a path with
	// . or .. segments, a redirect with an HTML body).
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no such endpoint: "+httpjson.Echo(r.Method+" "+r.URL.Path))
	})
	return &worker{handler: httpjson.WithRequestID(httpjson.RefuseUncleanPaths(mux)), table: table}, nil
}
