package capability

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
	"github.com/videogen-dev/videogen-operator/internal/worker/testmedia"
)

// gatedStore is a blob store whose Put stores the blob (it lands), then signals entered and
// waits for release before it answers with err (nil: success).
type gatedStore struct {
	blobstore.Store
	entered, release chan struct{}
	err              error
}

func (g *gatedStore) Put(ctx context.Context, name, contentType string, data []byte) (string, error) {
	url, err := g.Store.Put(ctx, name, contentType, data)
	close(g.entered)
	<-g.release
	if err != nil {
		return "", err
	}
	return url, g.err
}

// poseRenderRequest is an image.pose render that reaches publish without facedetect.
func poseRenderRequest(t *testing.T, r *rig) protocol.StageRequest {
	return protocol.StageRequest{
		Key: "acme/t/uid/render", Capability: "image.pose", Stage: "render",
		TemplateMediaURL: r.serve(testmedia.StillImage(t, r.media, 400, 300)),
		Inputs:           protocol.Inputs{FaceImageURL: r.serve(testmedia.OtherFace(t, r.media))},
		Previous:         map[string]string{"face_box": `[0,0,50,50]`, "target_box": `[150,50,100,100]`},
	}
}

func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A stage cancelled while it uploads its result keeps
// the uploaded blob.
//
// Interleaving, forced step by step: a render stage runs in the worker's table and reaches
// publish; its Put stores the blob (with S3 the object is committed) and, before Put answers,
// the controller cancels the stage (POST /v1/stages/{id}/cancel, or by key: the task was
// cancelled by its owner, timed out, or the manager gave up on it). The table marks the stage
// failed "cancelled" at once; then Put answers success, the stage's work returns its result,
// and the table drops it, since the stage already ended. Every step is reachable: publish is a
// network upload of up to hundreds of MB taking seconds, and a cancel may arrive at any time.
//
// What the user would see: nothing; the operator pays for it. The result blob, a whole
// rendered video, stays in the bucket (or the worker's directory) with no task pointing at it
// and nothing that will ever delete it: a storage leak per cancelled-while-uploading stage.
// The fix: the table discards the outcome it drops (Outcome.Discard), which deletes the blob.
func TestAStageCancelledWhileItUploadsLeavesNoBlob(t *testing.T) {
	r := newRig(t)
	gate := &gatedStore{Store: r.blobs, entered: make(chan struct{}), release: make(chan struct{})}
	r.p.d.Store = gate
	fn, err := r.p.Prepare(poseRenderRequest(t, r))
	if err != nil {
		t.Fatal(err)
	}
	tbl := jobs.New(context.Background(), jobs.Config{MaxConcurrent: 1, TTL: time.Hour})
	st, _, err := tbl.Start("acme/t/uid/render", fn)
	if err != nil {
		t.Fatal(err)
	}
	<-gate.entered // the blob is stored; Put has not answered yet
	if !tbl.Cancel(st.ID) {
		t.Fatal("the table did not know the stage")
	}
	close(gate.release) // Put answers success after the cancel
	tbl.Wait()
	if got, _ := tbl.Get(st.ID); got.State != protocol.StateFailed || got.Result != nil {
		t.Fatalf("stage = %+v, want failed without a result", got)
	}
	if left := blobFiles(t, r.blobs.Root); len(left) != 0 {
		t.Errorf("a cancelled stage left its result in the blob store, which nothing will ever delete: %v", left)
	}
}

// The same leak by another road. The stage is cancelled (or passes its
// deadline, or the worker stops) while Put uploads; the upload is committed by S3 but the
// cancelled context makes the client report an error (minio returns ctx.Err() when the
// context ends before the response is read). The stage fails "storing the result: context
// canceled" and the committed object, whose name was random, is leaked. Forced here by a Put
// that stores the blob and then answers context.Canceled.
func TestAPutThatLandsButReportsAnErrorLeavesNoBlob(t *testing.T) {
	r := newRig(t)
	gate := &gatedStore{Store: r.blobs, entered: make(chan struct{}), release: make(chan struct{}), err: context.Canceled}
	close(gate.release)
	r.p.d.Store = gate
	fn, err := r.p.Prepare(poseRenderRequest(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn(context.Background(), func(int, string) {}); err == nil {
		t.Fatal("the stage succeeded although its Put failed")
	}
	if left := blobFiles(t, r.blobs.Root); len(left) != 0 {
		t.Errorf("a Put that landed but reported an error left its blob behind: %v", left)
	}
}
