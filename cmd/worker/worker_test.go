package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/versity"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// stack is a real worker on a local port and a media server for its inputs.
type stack struct {
	client *httpbackend.Client
	worker *httptest.Server
	media  string
	mediaU string
}

func newStack(t *testing.T, mods ...func(*config)) *stack {
	t.Helper()
	s := &stack{media: t.TempDir()}
	mediaSrv := httptest.NewServer(http.FileServer(http.Dir(s.media)))
	t.Cleanup(mediaSrv.Close)
	s.mediaU = mediaSrv.URL

	ctx, cancel := context.WithCancel(context.Background())
	s.worker = httptest.NewUnstartedServer(nil)
	cfg := defaults()
	cfg.PublicURL = "http://" + s.worker.Listener.Addr().String()
	cfg.Blobs.Dir, cfg.TempDir = t.TempDir(), t.TempDir()
	cfg.AllowPrivateURLs = "127.0.0.0/8"
	cfg.Token = "worker-token-0123456789"
	for _, mod := range mods {
		mod(&cfg)
	}
	w, err := newWorker(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.worker.Config.Handler = w.handler
	s.worker.Start()
	t.Cleanup(func() { s.worker.Close(); cancel(); w.table.Wait() })

	s.client, err = httpbackend.New(httpbackend.Config{BaseURL: s.worker.URL, Token: "worker-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runTask drives both stages through the protocol the way the VideoTask controller does.
func (s *stack) runTask(t *testing.T, w generation.Work) generation.Observation {
	t.Helper()
	ctx := context.Background()
	var obs generation.Observation
	for _, stage := range videogenv1alpha1.Stages {
		w.Stage, w.Key = stage, generation.WorkKey(w.Namespace, w.Task, w.TaskUID, stage)
		if stage == videogenv1alpha1.StageRender {
			w.Previous = obs.Outputs
		}
		handle, err := s.client.Submit(ctx, w)
		if err != nil {
			t.Fatalf("submit %s: %v", stage, err)
		}
		if again, err := s.client.Submit(ctx, w); err != nil || again != handle {
			t.Fatalf("resubmitting %s gave %q (%v), want the same stage %q", stage, again, err, handle)
		}
		obs = s.await(t, w, handle)
		if obs.State != generation.Succeeded {
			t.Fatalf("%s: %+v", stage, obs)
		}
	}
	return obs
}

func (s *stack) await(t *testing.T, w generation.Work, handle string) generation.Observation {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		obs, err := s.client.Observe(context.Background(), w, handle)
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		if obs.State != generation.Running {
			return obs
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stage %s did not finish in time", handle)
	return generation.Observation{}
}

// download fetches a result URL like a caller would.
func download(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	path := filepath.Join(t.TempDir(), "result")
	data, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *stack) serve(file string) string { return s.mediaU + "/" + filepath.Base(file) }

func work(capability videogenv1alpha1.Capability) generation.Work {
	return generation.Work{Namespace: "acme", Task: "t-" + string(capability), TaskUID: "uid-1", Capability: capability}
}

func TestEndToEndTemplateThroughTheProtocol(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityTemplate)
	w.TemplateMediaURL = s.serve(testmedia.MovingVideo(t, s.media, 2, ""))
	seconds := int32(3)
	w.Duration = &seconds

	obs := s.runTask(t, w)
	if obs.Result == nil || obs.Result.MediaType != "video/mp4" || obs.Result.Metadata["duration"] != "3" {
		t.Fatalf("result = %+v", obs.Result)
	}
	info := testmedia.Probe(t, download(t, obs.Result.URL))
	if info.Width != testmedia.Width || info.Height != testmedia.Height || info.Duration < 2.9 || info.Duration > 3.1 {
		t.Errorf("downloaded result = %+v", info)
	}
}

// With --blob-store=s3 the result goes to the bucket (the same store the apiserver can use), not
// to the worker's disk: it survives the worker's pod and the URL is a presigned bucket URL.
func TestResultsGoToAnS3Bucket(t *testing.T) {
	s3 := versity.Start(t)
	t.Setenv("S3_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("S3_SECRET_ACCESS_KEY", s3.SecretKey)
	blobDir := t.TempDir()
	s := newStack(t, func(c *config) {
		c.Blobs = blobstore.Flags{Kind: "s3", Dir: blobDir, S3: blobstore.S3Config{
			Endpoint: s3.Endpoint, Insecure: true, Region: "us-east-1", Bucket: "results", Prefix: "results/", PresignTTL: time.Hour}}
	})
	store, err := blobstore.NewS3(blobstore.S3Config{Endpoint: s3.Endpoint, Insecure: true, Region: "us-east-1", Bucket: "results",
		AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Client().MakeBucket(context.Background(), "results", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}

	w := work(videogenv1alpha1.CapabilityTemplate)
	w.TemplateMediaURL = s.serve(testmedia.MovingVideo(t, s.media, 2, ""))
	seconds := int32(2)
	w.Duration = &seconds
	obs := s.runTask(t, w)
	if !strings.HasPrefix(obs.Result.URL, "http://"+s3.Endpoint+"/results/results/") || !strings.Contains(obs.Result.URL, "X-Amz-Signature=") {
		t.Fatalf("result URL %s is not a presigned URL in the bucket", obs.Result.URL)
	}
	if info := testmedia.Probe(t, download(t, obs.Result.URL)); info.Duration < 1.9 || info.Duration > 2.1 {
		t.Errorf("downloaded result = %+v", info)
	}
	if files, _ := os.ReadDir(blobDir); len(files) != 0 {
		t.Errorf("the worker wrote %d files to --blob-dir although results go to the bucket", len(files))
	}
	resp, err := http.Get(s.worker.URL + "/v1/blobs/anything.mp4")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/blobs/ = %d, want 404: nothing is served from disk", resp.StatusCode)
	}
}

func TestEndToEndEraserThroughTheProtocol(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityEraser)
	w.Inputs.SourceVideoURL = s.serve(testmedia.WatermarkedVideo(t, s.media, 2))

	obs := s.runTask(t, w)
	info := testmedia.Probe(t, download(t, obs.Result.URL))
	if info.Width != testmedia.Width || !info.HasAudio || obs.Result.Metadata["overlays_removed"] != "1" {
		t.Errorf("result %+v, probe %+v", obs.Result, info)
	}
}

func TestInputsOnPrivateAddressesFailTheStage(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityEraser)
	w.Stage, w.Key = videogenv1alpha1.StageAnalyze, "acme/t/uid/analyze"
	w.Inputs.SourceVideoURL = "http://169.254.169.254/latest/meta-data/video.mp4"
	handle, err := s.client.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if obs := s.await(t, w, handle); obs.State != generation.Failed || obs.Message == "" {
		t.Errorf("observation = %+v, want a failed stage that says why", obs)
	}
}

func TestARefusedRequestIsAPermanentError(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityEraser) // without a source video
	w.Stage, w.Key = videogenv1alpha1.StageAnalyze, "acme/t/uid/analyze"
	if _, err := s.client.Submit(context.Background(), w); !generation.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
}

func TestHealthz(t *testing.T) {
	s := newStack(t)
	resp, err := http.Get(s.worker.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Every path the worker does not serve is a 404 in the error envelope: net/http answered an
// unknown path with "404 page not found" in text/plain and a path with .. segments with a 307
// to the cleaned path and an HTML body.
func TestUnknownAndUncleanPathsAre404sInTheEnvelope(t *testing.T) {
	s := newStack(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/nope", "/", "/v1/blobs/../../worker-token", "/v1/blobs/./x.png", "//healthz"} {
		req, _ := http.NewRequest(http.MethodGet, s.worker.URL+path, nil)
		req.URL.Opaque = path // sent as written, not cleaned by the client
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Code, Message string
				RequestID     string `json:"request_id"`
			} `json:"error"`
		}
		decodeErr := json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || decodeErr != nil || body.Error.Code != "not_found" ||
			body.Error.RequestID == "" || body.Error.RequestID != resp.Header.Get("X-Request-Id") || resp.Header.Get("Location") != "" {
			t.Errorf("GET %s = %d %+v (%v), Location %q; want a 404 not_found in the envelope with its request id",
				path, resp.StatusCode, body, decodeErr, resp.Header.Get("Location"))
		}
	}
}

func TestEndToEndShortThroughTheProtocol(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityShort)
	w.TemplateMediaURL = s.serve(testmedia.FaceVideo(t, s.media, 2))
	w.Inputs.FaceImageURL = s.serve(testmedia.OtherFace(t, s.media))

	obs := s.runTask(t, w)
	info := testmedia.Probe(t, download(t, obs.Result.URL))
	if info.Width != testmedia.Width || info.Height != testmedia.Height || info.FPS != testmedia.Rate || !info.HasAudio {
		t.Errorf("result %+v, probe %+v", obs.Result, info)
	}
}

func TestCancelThroughTheProtocolFailsTheStage(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityTemplate)
	w.Stage, w.Key = videogenv1alpha1.StageRender, "acme/t/uid/render"
	w.TemplateMediaURL = s.serve(testmedia.MovingVideo(t, s.media, 2, ""))
	long := int32(600)
	w.Duration = &long
	handle, err := s.client.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.Cancel(context.Background(), w, handle); err != nil {
		t.Fatal(err)
	}
	if obs := s.await(t, w, handle); obs.State != generation.Failed || obs.Message != "cancelled" {
		t.Errorf("after cancel: %+v", obs)
	}
}

// A stage whose handle the operator never recorded (its Submit landed, the status write that
// recorded the id was lost to a deletion's conflict or a crash) is stopped by its key:
// Cancel(work, "") posts it to POST /v1/stages/cancel. Before, the client sent nothing and a
// 600 s render ran on at the worker, holding a slot, until its deadline.
func TestCancelWithoutAHandleStopsTheStageByItsKey(t *testing.T) {
	s := newStack(t)
	w := work(videogenv1alpha1.CapabilityTemplate)
	w.Stage, w.Key = videogenv1alpha1.StageRender, "acme/t/uid/render"
	w.TemplateMediaURL = s.serve(testmedia.MovingVideo(t, s.media, 2, ""))
	long := int32(600)
	w.Duration = &long
	handle, err := s.client.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	// The handle is thrown away: only the key is left.
	if err := s.client.Cancel(context.Background(), w, ""); err != nil {
		t.Fatal(err)
	}
	// The worker ends a cancelled stage before it answers the cancel.
	if obs, err := s.client.Observe(context.Background(), w, handle); err != nil || obs.State != generation.Failed || obs.Message != "cancelled" {
		t.Errorf("after cancel by key: %+v, %v; want failed cancelled", obs, err)
	}
}

// The worker runs stages for whoever may call /v1/stages, so it does not start without a
// token unless told explicitly that nothing else can reach it.
func TestTheWorkerRefusesToServeWithoutATokenUnlessToldToForLocalUse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := defaults()
	cfg.Token, cfg.Blobs.Dir, cfg.TempDir = "", t.TempDir(), t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := newWorker(ctx, cfg, log); err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Fatalf("newWorker without a token = %v, want a refusal naming --insecure-no-auth", err)
	}

	status := func(cfg config, authorization string) int {
		t.Helper()
		w, err := newWorker(ctx, cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/stages/stg_x/cancel", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		rec := httptest.NewRecorder()
		w.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("file-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := cfg
	fromFile.TokenFile = tokenFile
	if got := status(fromFile, ""); got != http.StatusUnauthorized {
		t.Errorf("no credentials with --token-file: %d, want 401", got)
	}
	if got := status(fromFile, "bearer file-token-0123456789"); got != http.StatusNoContent {
		t.Errorf("the file's token: %d, want 204", got)
	}
	insecure := cfg
	insecure.InsecureNoAuth = true
	if got := status(insecure, ""); got != http.StatusNoContent {
		t.Errorf("no credentials with --insecure-no-auth: %d, want 204", got)
	}
	both := fromFile
	both.Token = "env-token-0123456789"
	if _, err := newWorker(ctx, both, log); err == nil {
		t.Error("a token from the environment and from a file were both accepted")
	}
}

// --allow-private-service-media opens its ranges to the service's own media only: an official
// template's media on the service's network is fetched, the same URL as an account's
// ShortTemplate's target_url is refused (the stage fails, saying which input).
func TestOnlyOfficialTemplateMediaReachesTheServiceMediaRanges(t *testing.T) {
	s := newStack(t, func(cfg *config) { cfg.AllowPrivateURLs, cfg.AllowPrivateServiceMedia = "", "127.0.0.0/8" })
	w := work(videogenv1alpha1.CapabilityTemplate)
	w.TemplateMediaURL = s.serve(testmedia.MovingVideo(t, s.media, 1, ""))
	seconds := int32(1)
	w.Duration = &seconds

	w.TemplateMediaOfficial = true
	if obs := s.runTask(t, w); obs.State != generation.Succeeded {
		t.Fatalf("official template: %+v", obs)
	}

	w.TemplateMediaOfficial, w.Task = false, "t-short"
	w.Stage, w.Key = videogenv1alpha1.StageAnalyze, "acme/t-short/uid/analyze"
	handle, err := s.client.Submit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if obs := s.await(t, w, handle); obs.State != generation.Failed || !strings.Contains(obs.Message, "the template video could not be fetched") {
		t.Errorf("an account's template: %+v, want the stage failed for its template video", obs)
	}
}
