package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/imageinput"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// refusingClient stands in for the cluster behind the validation: nothing exists and nothing
// can be created, so a request that passes validation ends in a refusal that changes nothing.
// Methods it does not define panic (the embedded interface is nil), so a handler that reaches
// further than expected shows up as a fuzz failure.
type refusingClient struct{ client.Client }

func (refusingClient) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: "videogen.dev"}, key.Name)
}

func (refusingClient) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// Create refuses as the kube-apiserver's validation would (422 Invalid): a body that passed
// ours (a short template needs no points, so it gets this far) is answered 400, not 500.
func (refusingClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "videogen.dev", Kind: "Object"}, obj.GetName(),
		field.ErrorList{field.Forbidden(field.NewPath("metadata"), "refusingClient: creates are refused")})
}

// refusingLedger admits nothing: the account is always short.
type refusingLedger struct{}

func (refusingLedger) CreateTask(_ context.Context, _ *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	return nil, &ledger.InsufficientBalanceError{Required: price}
}

func (refusingLedger) Balance(context.Context, string) (ledger.Figures, error) {
	return ledger.Figures{}, nil
}

// fuzzRoutes are the handlers that decode a body, by the byte that picks one.
var fuzzRoutes = []struct {
	method, path string
	handle       func(*Server) func(http.ResponseWriter, *http.Request, apikeys.Principal)
}{
	{"POST", "/v1/videos/short", func(s *Server) func(http.ResponseWriter, *http.Request, apikeys.Principal) { return s.createShort }},
	{"POST", "/v1/videos/eraser", func(s *Server) func(http.ResponseWriter, *http.Request, apikeys.Principal) { return s.createEraser }},
	{"POST", "/v1/videos/template", func(s *Server) func(http.ResponseWriter, *http.Request, apikeys.Principal) {
		return s.createTemplateVideo
	}},
	{"POST", "/v1/images/pose", func(s *Server) func(http.ResponseWriter, *http.Request, apikeys.Principal) { return s.createPose }},
	{"POST", "/v1/short-templates", func(s *Server) func(http.ResponseWriter, *http.Request, apikeys.Principal) {
		return s.createShortTemplate
	}},
}

func fuzzServer() *Server {
	c := refusingClient{}
	return New(Config{
		Client: c, APIReader: c, Ledger: refusingLedger{}, DefaultPrice: 10,
		MaxBodyBytes: 64 << 10,
		ImageLimits:  imageinput.Limits{MaxBytes: 32 << 10, MaxSide: 256, MaxPixels: 1 << 14},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// FuzzSubmitRequest drives the real task-creating handlers (decode, validation, the
// Idempotency-Key, the URL policy, inline images) with arbitrary bodies and headers. Whatever
// comes in, the answer is a 4xx in the API's error shape, never a panic or a 5xx: the client
// refuses everything after validation, so no input can reach a 2xx. (One target, not several:
// each execution of a binary this size costs about a millisecond of coverage bookkeeping.)
func FuzzSubmitRequest(f *testing.F) {
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	seeds := []struct {
		route       uint8
		body, ctype string
		key         string
	}{
		{0, `{"template_id":"t","face":"https://cdn.example.com/f.jpg"}`, "application/json", ""},
		{0, `{"template_id":"t","face":"` + png + `","duration":5}`, "application/json", "k-1"},
		{0, `{"template_id":"t","face":"data:image/png;base64,` + png + `","webhook_url":"https://h.example.com/x"}`, "", "k"},
		{1, `{"video":"http://[::ffff:169.254.169.254]/v.mp4"}`, "application/json", ""},
		{1, `{"video":"http://2130706433/v.mp4","webhook_url":"http://0177.0.0.1/"}`, "application/x-www-form-urlencoded", ""},
		{2, `{"template_id":"t","duration":2147483648}`, "application/json", ""},
		{2, `{"template_id":"t","duration":1e309}`, "application/json", ""},
		{2, `{"template_id":"t","duration":-1}`, "application/merge-patch+json", "\x7f"},
		{3, `{"template_id":"ushort_abc","face":"https://cdn.example.com/f.jpg"}`, "application/json", ""},
		{4, `{"name":"n","target_url":"https://cdn.example.com/t.mp4","duration":3601}`, "application/json", ""},
		{0, `{"template_id":"t"} {}`, "text/plain", ""},
		{0, `[`, "application/json; charset=\"", ""},
		{1, "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.route, []byte(s.body), s.ctype, s.key)
	}
	srv := fuzzServer()
	f.Fuzz(func(t *testing.T, route uint8, body []byte, ctype, key string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if key != "" {
			req.Header[HeaderIdempotencyKey] = []string{key}
		}
		rec := httptest.NewRecorder()
		rt.handle(srv)(rec, req, apikeys.Principal{Account: "fuzz", KeyID: "fuzz"})

		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s %q (Content-Type %q, key %q) answered %d: %s", rt.path, body, ctype, key, rec.Code, rec.Body)
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s %q answered %d without the error shape: %s", rt.path, body, rec.Code, rec.Body)
		}

		// Every Idempotency-Key the API accepts names a valid task of its own account.
		if got, err := idempotencyKey(req); err == nil && got != "" {
			name := taskName("fuzz", got)
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				t.Fatalf("key %q names task %q: %v", got, name, errs)
			}
			if name != taskName("fuzz", got) || name == taskName("fuzz2", got) {
				t.Fatalf("key %q does not name one task per account", got)
			}
		}
	})
}
