package apiserver

// A suspended account's requests, and methods no endpoint takes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// accountLedger answers as internal/ledger does for one account: CreateTask checks the
// account's standing (accepting: missing, closing, suspended) before its balance, and Balance
// tells the figures whatever the standing.
type accountLedger struct {
	available int64
	standing  error // ErrAccountSuspended, ErrAccountClosing or nil
	creates   int
}

func (l *accountLedger) CreateTask(_ context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	l.creates++
	if l.standing != nil {
		return nil, l.standing
	}
	if l.available < price {
		return nil, &ledger.InsufficientBalanceError{Required: price, Available: l.available}
	}
	return task, nil
}

func (l *accountLedger) Balance(context.Context, string) (ledger.Figures, error) {
	return ledger.Figures{Balance: l.available}, nil
}

func pngFace(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 16, 16))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// What breaks: POST /v1/videos/short (and /v1/images/pose) with an inline base64 face from a
// suspended (or closing) account answers 402 insufficient_balance "ask your administrator for
// a top-up" when its balance is short, where docs/api.md ("Suspended accounts") and the ledger
// answer 403 account_suspended, and where the same account's request with a face URL, or its
// POST /v1/videos/eraser, gets that 403. The early balance check made for inline faces (refuse
// a short balance before storing the image) reads GET-balance figures, which say nothing of the
// account's standing, and answers 402 without asking the ledger, which checks the standing
// first.
//
// Input: an administrator suspends an account (spec.suspended: true) whose points are used up;
// its client submits a task with an inline face. Nothing races.
//
// What the user sees: 402 with advice to top up; an administrator who tops the account up gets
// the 403 only then. The client's handling of account_suspended (stop submitting, alert) never
// runs for inline-face submissions.
func TestASuspendedAccountWithAShortBalanceIsToldItIsSuspendedForAnInlineFaceToo(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := videogenv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	face := pngFace(t)
	for _, tc := range []struct {
		standing error
		code     string
	}{
		{ledger.ErrAccountSuspended, "account_suspended"},
		{ledger.ErrAccountClosing, "account_closing"},
	} {
		acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
		acct.Spec.Suspended = tc.standing == ledger.ErrAccountSuspended
		if tc.standing == ledger.ErrAccountClosing {
			acct.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			acct.Finalizers = []string{videogenv1alpha1.FinalizerLedger}
		}
		tmpl := studioTemplate()
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(acct, tmpl).Build()
		l := &accountLedger{available: 3, standing: tc.standing}
		blobs := &blobstore.Dir{Root: t.TempDir(), BaseURL: "http://apiserver.test/v1/blobs/"}
		s := New(Config{Client: c, APIReader: c, Ledger: l, Blobs: blobs, DefaultPrice: 10,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

		for _, body := range []string{
			`{"template_id":"studio","face":"https://cdn.example/face.png"}`,
			`{"template_id":"studio","face":"` + face + `"}`,
		} {
			for _, key := range []string{"", "key-1"} {
				req := httptest.NewRequest(http.MethodPost, "/v1/videos/short", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set(HeaderIdempotencyKey, key)
				}
				rec := serveAs(s.createShort, "acct", req)
				code, msg := errorOf(t, rec)
				inline := !strings.Contains(body, "https://")
				if rec.Code != http.StatusForbidden || code != tc.code {
					t.Errorf("%v account, short balance, inline face %v, key %q: %d %s %q; want 403 %s as for every task-creating POST",
						tc.standing, inline, key, rec.Code, code, msg, tc.code)
				}
			}
		}
		var tasks videogenv1alpha1.VideoTaskList
		if err := c.List(context.Background(), &tasks, client.InNamespace("acct")); err != nil || len(tasks.Items) != 0 {
			t.Errorf("tasks created: %v %v", tasks.Items, err)
		}
	}
}

// What breaks: POST /v1/short-templates with an Idempotency-Key, retried after its account was
// suspended, answers 403 account_suspended "templates cannot be created or changed" although
// the first request created the template: the suspension check runs before the replay check.
// docs/api.md says a retry with the key "answers 200 with the template it made", and a
// task-creating POST replays its task for a suspended account (the replay comes before the
// ledger is asked).
//
// Interleaving: (1) the client POSTs with key K; the template is created, and the 201 is lost
// (a connection reset, a replica dying after the create, a client timeout); (2) an
// administrator suspends the account (spec.suspended: true); (3) the client retries with K and
// the same body, as the Idempotency-Key contract tells it to. Every step is ordinary.
//
// What the user sees: 403 saying its template could not be created; GET /v1/short-templates
// lists it all the same. A client that believes the 403 creates it again with a new key once
// the account is resumed, and has two.
func TestARetriedShortTemplateCreateReplaysForASuspendedAccount(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := videogenv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(acct).Build()
	s := New(Config{Client: c, APIReader: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const body = `{"name":"Promo","target_url":"https://cdn.example/promo.mp4"}`
	post := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/short-templates", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderIdempotencyKey, "tmpl-key-1")
		return serveAs(s.createShortTemplate, "acct", req)
	}
	first := post(body)
	if first.Code != http.StatusCreated {
		t.Fatalf("first create: %d %s", first.Code, first.Body)
	}
	acct.Spec.Suspended = true
	if err := c.Update(context.Background(), acct); err != nil {
		t.Fatal(err)
	}

	retry := post(body)
	if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "true" {
		code, msg := errorOf(t, retry)
		t.Fatalf("retry with the key after the suspension: %d %s %q; want 200 with the template the first request made", retry.Code, code, msg)
	}
	// Anything else from a suspended account is still refused: another body with the key, and
	// a new template.
	if other := post(`{"name":"Other","target_url":"https://cdn.example/other.mp4"}`); other.Code != http.StatusForbidden {
		t.Errorf("another body with the key: %d %s, want 403 account_suspended", other.Code, other.Body)
	}
	var list videogenv1alpha1.ShortTemplateList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 1 {
		t.Errorf("short templates: %d, %v; want the one", len(list.Items), err)
	}
}

// What breaks: a CONNECT request in authority form ("CONNECT example.com:443 HTTP/1.1", what
// every proxy client, and many scanners, send) is answered by the mux's own text/plain "404
// page not found", not the error envelope: RefuseUncleanPaths lets every CONNECT through, and
// no pattern (not even the catch-all "/") matches an empty path. A CONNECT with an unclean
// path ("/v1/tasks/../balance") is answered 405 "allowed: GET, HEAD" for a path that GET
// answers 404 (paths with .. are refused).
//
// Input: the request line itself, on the API port; nothing races.
//
// What the user sees: a plain-text 404 without a request id in the body, unlike every other
// answer of the API.
//
// The other requests are pins. Checked, holds: TRACE, OPTIONS and made-up methods get a 4xx in
// the envelope (OPTIONS * net/http answers itself, 200 and empty, as HTTP says).
func TestOddMethodsGetA4xxInTheEnvelope(t *testing.T) {
	s := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		line   string
		status int
	}{
		{"CONNECT example.com:443 HTTP/1.1", http.StatusNotFound},
		{"CONNECT /v1/tasks/../balance HTTP/1.1", http.StatusNotFound},
		{"CONNECT /v1/tasks HTTP/1.1", http.StatusMethodNotAllowed},
		{"TRACE /v1/tasks HTTP/1.1", http.StatusMethodNotAllowed},
		{"OPTIONS /v1/tasks HTTP/1.1", http.StatusMethodNotAllowed},
		{"PROPFIND /v1/balance HTTP/1.1", http.StatusMethodNotAllowed},
		{"BREW /v1/videos/short HTTP/1.1", http.StatusMethodNotAllowed},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "%s\r\nHost: api.test\r\nConnection: close\r\n\r\n", tc.line)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		var e struct {
			Error struct {
				Code      string `json:"code"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || e.Error.Code == "" ||
			!strings.HasPrefix(e.Error.RequestID, "req_") {
			t.Errorf("%s: %d %s %q, want %d in the error envelope", tc.line, resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.status)
		}
	}
}
