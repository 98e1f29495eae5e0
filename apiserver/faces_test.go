package apiserver_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// competingLedger is the way to the suite's ledger of a replica that loses a race: another
// request's task, made by rival from the task being submitted, is admitted just before it.
type competingLedger struct {
	apiserver.Ledger
	rival func(task *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTask
}

func (c competingLedger) CreateTask(ctx context.Context, t *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	_, err := c.Ledger.CreateTask(ctx, c.rival(t.DeepCopy()), price)
	Expect(err).NotTo(HaveOccurred(), "the rival task")
	return c.Ledger.CreateTask(ctx, t, price)
}

// otherFace makes a rival task carry a face of its own.
func otherFace(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTask {
	t.Spec.Inputs.FaceImageURL = "https://cdn.example.com/rival.jpg"
	t.Annotations[apiserver.AnnotationRequestHash] = "rival-request"
	return t
}

var _ = Describe("An inline face of a task the ledger did not create", func() {
	var (
		a    account
		tmpl string
	)
	BeforeEach(func() {
		a = newAccount(30)
		tmpl = template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
	})

	// The balance covered the task when the replica looked, and another task took it before the
	// ledger admitted this one: 402 after the face was stored.
	drained := func() *apiClient {
		return startAPIServerWith(rate.Inf, 1, nil, nil, competingLedger{&ledger.Client{URL: ledgerURL},
			func(t *videogenv1alpha1.VideoTask) *videogenv1alpha1.VideoTask {
				t.Name = envsuite.Unique("vt-rival")
				return otherFace(t)
			}})
	}

	It("is removed when the ledger answers 402", func() {
		srv := drained()
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()})
		Expect(resp.Status).To(Equal(http.StatusPaymentRequired), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("insufficient_balance"))
		Expect(storedBlobs(srv)).To(BeEmpty(), "the face of the refused task was kept")
	})

	// Another request with the key and the same face may share its stored name, and be admitted
	// yet: the face waits for the sweep.
	It("is kept for the sweep after a 402 to a request with an Idempotency-Key", func() {
		srv := drained()
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()}, "Idempotency-Key", "drained")
		Expect(resp.Status).To(Equal(http.StatusPaymentRequired), string(resp.Body))
		Expect(storedBlobs(srv)).To(HaveLen(1))
		Expect(srv.srv.SweepFaces(ctx, time.Now().Add(time.Minute))).To(Equal(1))
		Expect(storedBlobs(srv)).To(BeEmpty())
	})

	// The key's task was made with another face by a request the replay checks did not see:
	// the ledger finds it, the answer is 422, and this face is nobody's.
	It("is removed when the key's task, found by the ledger, carries another face", func() {
		srv := startAPIServerWith(rate.Inf, 1, nil, nil, competingLedger{&ledger.Client{URL: ledgerURL}, otherFace})
		resp := srv.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()}, "Idempotency-Key", "raced")
		Expect(resp.Status).To(Equal(http.StatusUnprocessableEntity), string(resp.Body))
		Expect(resp.ErrorCode()).To(Equal("idempotency_key_reused"))
		Expect(storedBlobs(srv)).To(BeEmpty(), "the face of the refused request was kept")
		Expect(tasksIn(a.ns)).To(ConsistOf(HaveField("Spec.Inputs.FaceImageURL", "https://cdn.example.com/rival.jpg")))
	})
})

var _ = Describe("The sweep of stored faces", func() {
	It("removes an old face no task uses, keeps a used one and a recent one, and removes a face once its task is deleted", func() {
		a := newAccount(100)
		srv := startAPIServer(rate.Inf, 1, nil, nil)
		resp := srv.post("/v1/videos/short", a.key, map[string]any{
			"template_id": template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil), "face": facePNG()})
		Expect(resp.Status).To(Equal(http.StatusAccepted), string(resp.Body))
		Expect(storedBlobs(srv)).To(HaveLen(1))
		used := storedBlobs(srv)[0]

		face, err := base64.StdEncoding.DecodeString(facePNG())
		Expect(err).NotTo(HaveOccurred())
		store := &blobstore.Dir{Root: srv.blobDir}
		put := func(name string) string {
			_, err := store.Put(ctx, name, "image/png", face)
			Expect(err).NotTo(HaveOccurred())
			return name
		}
		stray := put(blobstore.ContentName("vt-crashed", "image/png", face))    // its replica died before the create
		recent := put(blobstore.ContentName("vt-in-flight", "image/png", face)) // its create is under way
		other := put(blobstore.NewName("image/png"))                            // not a face: another kind of blob
		hoursAgo := time.Now().Add(-2 * time.Hour)
		for _, name := range []string{used, stray, other} {
			Expect(os.Chtimes(filepath.Join(srv.blobDir, name), hoursAgo, hoursAgo)).To(Succeed())
		}

		Expect(srv.srv.SweepFaces(ctx, time.Now().Add(-apiserver.FaceSweepAge))).To(Equal(1))
		Expect(storedBlobs(srv)).To(ConsistOf(used, recent, other))

		// The finished-task collector deletes tasks; so may anyone.
		Expect(k8sClient.Delete(ctx, &tasksIn(a.ns)[0])).To(Succeed())
		Eventually(func() []string {
			_, err := srv.srv.SweepFaces(ctx, time.Now().Add(-apiserver.FaceSweepAge))
			Expect(err).NotTo(HaveOccurred())
			return storedBlobs(srv)
		}).Should(ConsistOf(recent, other))
	})
})
