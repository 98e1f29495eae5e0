package apiserver

// Hostile and odd client input on the
// /v1 contract, driven through the handlers with a fake cluster client.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// refusingServer is a Server whose cluster client answers every create and update of a
// ShortTemplate with refusal (nil: the fake cluster's own answer).
func refusingServer(t *testing.T, refusal error, objs ...client.Object) (*Server, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := videogenv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	refuse := func(obj client.Object) error {
		if _, ok := obj.(*videogenv1alpha1.ShortTemplate); ok {
			return refusal
		}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	return New(Config{Client: c, APIReader: c}), c
}

// serveAs runs h for account acct behind the request-id middleware, as Handler does.
func serveAs(h func(http.ResponseWriter, *http.Request, apikeys.Principal), acct string, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	httpjson.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, apikeys.Principal{Account: acct, KeyID: "k"})
	})).ServeHTTP(rec, req)
	return rec
}

func errorOf(t *testing.T, rec *httptest.ResponseRecorder) (code, message string) {
	t.Helper()
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("answer %d is not the error envelope: %s", rec.Code, rec.Body)
	}
	if !strings.HasPrefix(body.Error.RequestID, "req_") {
		t.Errorf("error envelope without a request id: %s", rec.Body)
	}
	return body.Error.Code, body.Error.Message
}

// What breaks: POST /v1/short-templates passes the kube-apiserver's refusal of its create on as
// 500 internal_error unless it is Invalid or AlreadyExists. A ResourceQuota on
// count/shorttemplates.videogen.dev in the account's namespace (or an admission webhook or
// policy, or the namespace being terminated as the account is closed) refuses with 403
// Forbidden: nothing was created, the refusal is the namespace's, and a retry as is cannot
// help. The task POSTs answer the same refusal 403 create_refused (docs/api.md); the
// short-template POST and PATCH were left out.
//
// Interleaving: an administrator caps the tenant's short templates with a ResourceQuota
// (kubectl, within a cluster admin's RBAC); the tenant, by creating templates until the cap,
// POSTs one more. The kube-apiserver's quota admission answers 403 "exceeded quota"; the
// fake client answers the same error here.
//
// What the user sees: 500 internal_error ("quote the request id") for a refusal of the
// account's, which docs/api.md reserves for the service's own faults, with no reason given.
func TestAShortTemplateTheClusterRefusesIsA403NotA500(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "shorttemplates"}, "ushort-x",
		errors.New(`exceeded quota: short-templates, requested: count/shorttemplates.videogen.dev=1, used: count/shorttemplates.videogen.dev=0, limited: count/shorttemplates.videogen.dev=0`))
	body := `{"name":"Mine","target_url":"https://cdn.example.com/t.mp4"}`

	t.Run("create", func(t *testing.T) {
		for _, key := range []string{"", "over-quota"} {
			s, c := refusingServer(t, quota)
			req := httptest.NewRequest(http.MethodPost, "/v1/short-templates", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set(HeaderIdempotencyKey, key)
			}
			rec := serveAs(s.createShortTemplate, "acct", req)
			code, msg := errorOf(t, rec)
			if rec.Code != http.StatusForbidden || code != httpjson.CodeCreateRefused || !strings.Contains(msg, "exceeded quota") {
				t.Errorf("key %q: answered %d %s, want 403 create_refused with the cluster's reason", key, rec.Code, rec.Body)
			}
			var sts videogenv1alpha1.ShortTemplateList
			if err := c.List(context.Background(), &sts); err != nil || len(sts.Items) != 0 {
				t.Errorf("key %q: templates after the refusal: %d (%v)", key, len(sts.Items), err)
			}
		}
	})

	t.Run("patch", func(t *testing.T) {
		// An admission policy that refuses the change (the quota does not count updates).
		policy := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "shorttemplates"}, "ushort-x",
			errors.New(`ValidatingAdmissionPolicy 'no-changes' denied request`))
		rec := renameRefusedBy(t, policy)
		code, msg := errorOf(t, rec)
		if rec.Code != http.StatusForbidden || code != httpjson.CodeCreateRefused || !strings.Contains(msg, "no-changes") {
			t.Errorf("answered %d %s, want 403 create_refused with the cluster's reason", rec.Code, rec.Body)
		}
	})
}

// What breaks (found on the local stack): a ValidatingAdmissionPolicy whose validation sets
// no reason denies with the kube-apiserver's default, 422 Invalid, not 403 Forbidden, and
// POST and PATCH /v1/short-templates took every Invalid for the CRD's validation: they answered
// 400 invalid_request "the short template was refused: check name, target_url, cover_url and
// duration against the API reference", sending the tenant to fix fields that were fine, and
// hid the policy's reason. docs/api.md: when the cluster refuses to store the template ("an
// admission policy said no"), POST and PATCH answer 403 create_refused, the message saying why.
//
// Interleaving: an administrator binds a policy (`validations: [{expression: ..., message:
// ...}]`, no reason) to the account's namespace; the tenant POSTs a valid template, or PATCHes
// one. The kube-apiserver answered, on the local stack: 422, reason Invalid, message
// `shorttemplates.videogen.dev "ushort-abc" is forbidden: ValidatingAdmissionPolicy 'p' with
// binding 'p' denied request: <message>`, one cause with only that message (no field, no
// type); the CRD's own validation gives every cause its type (FieldValueInvalid, ...).
//
// What the user sees: 400 invalid_request naming no reason, for a refusal of the account's.
func TestAShortTemplateAnAdmissionPolicyRefusesAsInvalidIsA403CreateRefused(t *testing.T) {
	const denial = "ValidatingAdmissionPolicy 'no-templates' with binding 'no-templates' denied request: templates are closed here"
	policy := apierrors.NewForbidden(schema.GroupResource{Group: "videogen.dev", Resource: "shorttemplates"}, "ushort-x", errors.New(denial))
	policy.ErrStatus.Reason = metav1.StatusReasonInvalid
	policy.ErrStatus.Code = http.StatusUnprocessableEntity
	policy.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: denial}}
	if !apierrors.IsInvalid(policy) {
		t.Fatal("the policy's refusal must be an Invalid, as the kube-apiserver sends it")
	}

	t.Run("create", func(t *testing.T) {
		s, c := refusingServer(t, policy)
		req := httptest.NewRequest(http.MethodPost, "/v1/short-templates",
			strings.NewReader(`{"name":"Mine","target_url":"https://cdn.example.com/t.mp4"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := serveAs(s.createShortTemplate, "acct", req)
		code, msg := errorOf(t, rec)
		if rec.Code != http.StatusForbidden || code != httpjson.CodeCreateRefused || !strings.Contains(msg, "templates are closed here") {
			t.Errorf("answered %d %s, want 403 create_refused with the policy's reason", rec.Code, rec.Body)
		}
		var sts videogenv1alpha1.ShortTemplateList
		if err := c.List(context.Background(), &sts); err != nil || len(sts.Items) != 0 {
			t.Errorf("templates after the refusal: %d (%v)", len(sts.Items), err)
		}
	})

	t.Run("patch", func(t *testing.T) {
		rec := renameRefusedBy(t, policy)
		code, msg := errorOf(t, rec)
		if rec.Code != http.StatusForbidden || code != httpjson.CodeCreateRefused || !strings.Contains(msg, "templates are closed here") {
			t.Errorf("answered %d %s, want 403 create_refused with the policy's reason", rec.Code, rec.Body)
		}
	})

	// The CRD's own validation stays a 400 naming the field.
	t.Run("the CRD's validation", func(t *testing.T) {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: "videogen.dev", Kind: "ShortTemplate"}, "ushort-x", field.ErrorList{
			field.Invalid(field.NewPath("spec", "displayName"), "", "displayName must not be blank")})
		s, _ := refusingServer(t, invalid)
		req := httptest.NewRequest(http.MethodPost, "/v1/short-templates",
			strings.NewReader(`{"name":"Mine","target_url":"https://cdn.example.com/t.mp4"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := serveAs(s.createShortTemplate, "acct", req)
		if code, msg := errorOf(t, rec); rec.Code != http.StatusBadRequest || code != httpjson.CodeInvalidRequest || !strings.Contains(msg, `"name"`) {
			t.Errorf("answered %d %s, want 400 invalid_request naming \"name\"", rec.Code, rec.Body)
		}
	})
}

// What breaks: a JSON string may spell a character as a \u escape, and a lone UTF-16
// surrogate (\ud800 with no low half after it, or a \udc00 alone) is no character at all;
// encoding/json reads it as U+FFFD without a word. checkUTF8 refuses the same damage done by a
// raw stray byte ("caf\xe9") for exactly this reason: "caf\ufffd" would be stored as if it had
// been sent. The escaped spelling passes every check (the body is valid UTF-8, U+FFFD is no
// control character), so the template is created with a name, or a URL, that nobody sent.
//
// Input: POST /v1/short-templates {"name":"caf\ud800", ...} (a client that cuts a UTF-16
// string between the halves of an emoji, as JavaScript's String.prototype.slice does).
//
// What the user sees: 201 with "name": "caf\ufffd"; two different requests ("\ud800" and
// "\udbff") also hash alike, so one replays as the other under the same Idempotency-Key.
func TestALoneSurrogateEscapeIsRefusedNotStoredAsAReplacementCharacter(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"name":"caf\ud800","target_url":"https://cdn.example.com/t.mp4"}`, `"name"`},
		{`{"name":"Mine \ud83d","target_url":"https://cdn.example.com/t.mp4"}`, `"name"`},
		{`{"name":"\udc00 low half first","target_url":"https://cdn.example.com/t.mp4"}`, `"name"`},
		{`{"name":"Mine","target_url":"https://cdn.example.com/\uDBFF\u0041.mp4"}`, `"target_url"`},
	} {
		s, c := refusingServer(t, nil)
		req := httptest.NewRequest(http.MethodPost, "/v1/short-templates", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		rec := serveAs(s.createShortTemplate, "acct", req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: answered %d %s, want 400", tc.body, rec.Code, rec.Body)
			continue
		}
		if code, msg := errorOf(t, rec); code != httpjson.CodeInvalidRequest || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: answered %s %q, want invalid_request naming %s", tc.body, code, msg, tc.field)
		}
		var sts videogenv1alpha1.ShortTemplateList
		if err := c.List(context.Background(), &sts); err != nil || len(sts.Items) != 0 {
			t.Errorf("%s: templates after the refusal: %d (%v)", tc.body, len(sts.Items), err)
		}
	}
	// Checked, holds as well: a pair in escapes is the character it spells.
	s, _ := refusingServer(t, nil)
	req := httptest.NewRequest(http.MethodPost, "/v1/short-templates",
		strings.NewReader(`{"name":"Mine \ud83d\ude00 \\ud800","target_url":"https://cdn.example.com/t.mp4"}`))
	req.Header.Set("Content-Type", "application/json")
	if rec := serveAs(s.createShortTemplate, "acct", req); rec.Code != http.StatusCreated || !strings.Contains(rec.Body.String(), "Mine 😀 \\\\ud800") {
		t.Errorf("a surrogate pair and an escaped backslash: answered %d %s, want 201 with the name as sent", rec.Code, rec.Body)
	}
}

// loneSurrogate agrees with encoding/json: it reports exactly the strings that decode to a
// U+FFFD nobody sent.
func TestLoneSurrogateScansEscapesAsEncodingJSONReadsThem(t *testing.T) {
	for text, want := range map[string]bool{
		`"a"`: false, `"\ud83d\ude00"`: false, `"\\ud800"`: false, `"\\\ud800"`: true, `"\ud800\ud800"`: true,
		`"\ud800\u0041"`: true, `"\ud800"`: true, `"\udfff"`: true, `"\ud7ff\ue000"`: false, `"\"\ud800"`: true,
		`["\ud800x"]`: true, `{"a":"\\","b":"\ud83d\ude00"}`: false, `"\ufffd"`: false, `"\ud800\\udc00"`: true,
	} {
		if got := loneSurrogate([]byte(text)); got != want {
			t.Errorf("loneSurrogate(%s) = %v, want %v", text, got, want)
		}
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		round, _ := json.Marshal(v)
		if replaced := strings.Count(string(round), "\ufffd") > strings.Count(text, `\ufffd`); replaced != want {
			t.Errorf("%s: encoding/json replaced a character: %v, the scan says %v", text, replaced, want)
		}
	}
}

// renameRefusedBy PATCHes the name of account acct's stored template ushort_x on a server whose
// every write the cluster refuses with refusal, and returns the answer.
func renameRefusedBy(t *testing.T, refusal error) *httptest.ResponseRecorder {
	t.Helper()
	st := &videogenv1alpha1.ShortTemplate{}
	st.Namespace, st.Name = "acct", "ushort-x"
	st.Labels = map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_x"}
	st.Spec = videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://cdn.example.com/t.mp4"}
	s, _ := refusingServer(t, refusal, st)
	req := httptest.NewRequest(http.MethodPatch, "/v1/short-templates/ushort_x", strings.NewReader(`{"name":"Renamed"}`))
	req.SetPathValue("id", "ushort_x")
	req.Header.Set("Content-Type", "application/json")
	return serveAs(s.patchShortTemplate, "acct", req)
}
