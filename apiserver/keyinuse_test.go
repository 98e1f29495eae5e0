package apiserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
)

var _ = Describe("An Idempotency-Key still in use", func() {
	var (
		a    account
		body map[string]any
	)
	BeforeEach(func() {
		a = newAccount(0)
		topUp(a.ns, 100)
		body = map[string]any{"template_id": template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil),
			"face": "https://cdn.example.com/face.jpg"}
	})

	// A request with the key is between its admission and its create (at the ledger): a second
	// one, through any replica, is told to retry (409) rather than frozen again; once the first
	// is done, the same request replays its task.
	It("answers 409 to a second request while the first with the same key is being created, then replays it", func() {
		release := holdCreate(apiserver.TaskName(a.ns, "in-flight"))
		defer release()
		first := make(chan response, 1)
		go func() {
			defer GinkgoRecover()
			first <- api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "in-flight")
		}()
		// The ledger has counted the first (it is being created): the balance says so.
		Eventually(func() any { return api.get("/v1/balance", a.key).JSON()["frozen"] }).Should(BeNumerically("==", 30))
		for _, srv := range []*apiClient{api, secondReplica()} {
			second := srv.post("/v1/videos/short", a.key, body, "Idempotency-Key", "in-flight")
			Expect(second.Status).To(Equal(http.StatusConflict), string(second.Body))
			Expect(second.ErrorCode()).To(Equal("idempotency_key_in_use"))
			Expect(second.Header.Get("Retry-After")).To(Equal("1"), "when to retry, as every 409 idempotency_key_in_use says")
		}
		release()
		var got response
		Eventually(first).Should(Receive(&got))
		Expect(got.Status).To(Equal(http.StatusAccepted), string(got.Body))
		replay := api.post("/v1/videos/short", a.key, body, "Idempotency-Key", "in-flight")
		Expect(replay.Status).To(Equal(http.StatusOK))
		Expect(replay.JSON()["id"]).To(Equal(got.JSON()["id"]))
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		expectCharged(a.ns, 70, 30)
	})
})

// Requests with one key that miss the replay check (the first is still being created) each
// store their inline face before the ledger tells them the task exists: the face's stored name
// is derived from the task and the bytes, so they store one object, not one each.
var _ = Describe("An inline face sent again with the same Idempotency-Key", func() {
	It("is stored once", func() {
		a := newAccount(100)
		body := map[string]any{"template_id": template(videogenv1alpha1.CapabilityPose, ptr.To[int64](30), nil), "face": facePNG()}
		before := storedBlobs(api)
		release := holdCreate(apiserver.TaskName(a.ns, "same-face"))
		defer release()
		first := make(chan response, 1)
		go func() {
			defer GinkgoRecover()
			first <- api.post("/v1/images/pose", a.key, body, "Idempotency-Key", "same-face")
		}()
		Eventually(func() any { return api.get("/v1/balance", a.key).JSON()["frozen"] }).Should(BeNumerically("==", 30))
		second := api.post("/v1/images/pose", a.key, body, "Idempotency-Key", "same-face")
		Expect(second.Status).To(Equal(http.StatusConflict), string(second.Body))
		release()
		var got response
		Eventually(first).Should(Receive(&got))
		Expect(got.Status).To(Equal(http.StatusAccepted), string(got.Body))

		added := newBlobs(before, storedBlobs(api))
		Expect(added).To(HaveLen(1), "both requests stored the face; it must be one object")
		Expect(added[0]).To(MatchRegexp(`^[0-9a-f]{64}\.png$`), "named by a SHA-256, with the extension of the detected type")
		Expect(tasksIn(a.ns)[0].Spec.Inputs.FaceImageURL).To(HaveSuffix("/" + added[0]))
	})
})

// A retry with the key and another face, through a replica whose cache has not seen the task
// yet: the mismatch is found before the new face is stored, so the 422 leaves nothing behind.
var _ = Describe("Another inline face sent with a used Idempotency-Key", func() {
	It("is refused with 422 before it is stored", func() {
		a := newAccount(100)
		lagging := startAPIServer(rate.Inf, 1, nil, func(c client.Client) client.Client {
			return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*videogenv1alpha1.VideoTask); ok {
						return apierrors.NewNotFound(schema.GroupResource{Group: "videogen.dev", Resource: "videotasks"}, key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
		})
		tmpl := template(videogenv1alpha1.CapabilityShort, ptr.To[int64](30), nil)
		first := lagging.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": facePNG()}, "Idempotency-Key", "other-face")
		Expect(first.Status).To(Equal(http.StatusAccepted), string(first.Body))
		before := storedBlobs(lagging)
		Expect(before).To(HaveLen(1))

		other := lagging.post("/v1/videos/short", a.key, map[string]any{"template_id": tmpl, "face": pngOfSide(48)}, "Idempotency-Key", "other-face")
		Expect(other.Status).To(Equal(http.StatusUnprocessableEntity), string(other.Body))
		Expect(other.ErrorCode()).To(Equal("idempotency_key_reused"))
		Expect(storedBlobs(lagging)).To(Equal(before), "the refused face was stored")
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		expectCharged(a.ns, 70, 30)
	})
})

// pngOfSide is a base64 PNG of side×side pixels.
func pngOfSide(side int) string {
	GinkgoHelper()
	var buf bytes.Buffer
	Expect(png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, side, side)))).To(Succeed())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// storedBlobs lists the objects in a replica's blob directory.
func storedBlobs(srv *apiClient) []string {
	GinkgoHelper()
	entries, err := os.ReadDir(srv.blobDir)
	if err != nil && !os.IsNotExist(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

func newBlobs(before, after []string) []string {
	var added []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			added = append(added, n)
		}
	}
	return added
}

var _ = Describe("Operability", func() {
	It("logs one structured line per request, carrying its request id", func() {
		var logs bytes.Buffer
		srv := apiserver.New(apiserver.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		id := rec.Header().Get("X-Request-Id")
		Expect(id).To(HavePrefix("req_"))

		var line map[string]any
		Expect(json.Unmarshal(logs.Bytes(), &line)).To(Succeed(), logs.String())
		Expect(line).To(HaveKeyWithValue("msg", "request"))
		Expect(line).To(HaveKeyWithValue("request_id", id))
		Expect(line).To(HaveKeyWithValue("route", "GET /v1/openapi.json"))
		Expect(line).To(HaveKeyWithValue("status", BeNumerically("==", 200)))
	})

	It("answers /healthz on the API port", func() {
		rec := httptest.NewRecorder()
		apiserver.New(apiserver.Config{}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		Expect(rec.Body.String()).To(Equal("ok"))
	})
})
