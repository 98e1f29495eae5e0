package apiserver

// The hop between the REST apiserver and the ledger.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// hopLedger stands for the elected manager behind the ledger's Service during a failover: the
// first create it is sent lands (the task is stored in c) and its manager dies before it
// answers (the connection closes unanswered); every later attempt is answered second, as the
// manager elected next answers it.
func hopLedger(t *testing.T, c client.Client, second func(http.ResponseWriter)) (*ledger.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			second(w)
			return
		}
		var req struct {
			Price int64                       `json:"price"`
			Task  *videogenv1alpha1.VideoTask `json:"task"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
			return
		}
		if err := c.Create(context.Background(), req.Task); err != nil {
			t.Error(err)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close()
	}))
	t.Cleanup(srv.Close)
	return &ledger.Client{URL: srv.URL, Deadline: 5 * time.Second,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 5}}, &calls
}

func ledgerAnswer(status int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func hopServer(t *testing.T) (*Server, client.Client, func(l Ledger)) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := videogenv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "acct", Name: videogenv1alpha1.PointAccountName}}
	tmpl := studioTemplate()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(acct, tmpl).Build()
	cfg := Config{Client: c, APIReader: c, DefaultPrice: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := New(cfg)
	return s, c, func(l Ledger) { s.cfg.Ledger = l }
}

func postShort(s *Server, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/videos/short",
		strings.NewReader(`{"template_id":"studio","face":"https://cdn.example/face.png"}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	return serveAs(s.createShort, "acct", req)
}

func tasksOf(t *testing.T, c client.Client) []videogenv1alpha1.VideoTask {
	t.Helper()
	var tasks videogenv1alpha1.VideoTaskList
	if err := c.List(context.Background(), &tasks, client.InNamespace("acct")); err != nil {
		t.Fatal(err)
	}
	return tasks.Items
}

// What breaks: a request without an Idempotency-Key whose create landed on a manager that died
// before it answered, and whose retry (the ledger Client's, within the same call) was answered
// 409 task_exists by the manager elected next, is answered 503 "the task may have been
// created ... send an Idempotency-Key", though the task of its name exists, is its own (the
// name is random to the request) and holds its price: one read around the cache says so.
//
// Interleaving: 1. the replica sends the create to the elected manager A; A admits it and the
// task is stored; 2. A exits (its Lease lost, or a crash) before it answers: the connection
// closes unanswered; 3. the Client retries, through the Service, on the manager elected next,
// whose books count the stored task (its list or its event): 409 task_exists. Every step is
// a failover's (docs/ledger.md); the Client's retry of an unanswered create is its contract.
//
// What the user sees: 503, for a task that runs and is charged; a client (or an SDK) that
// retries a 503 submits it again and pays for two.
func TestAKeylessCreateWhoseRetryFindsItsLandedTaskIsAccepted(t *testing.T) {
	s, c, use := hopServer(t)
	l, calls := hopLedger(t, c, ledgerAnswer(http.StatusConflict, `{"error":{"code":"task_exists","message":"a task of that name is open"}}`))
	use(l)
	rec := postShort(s, "")
	tasks := tasksOf(t, c)
	if calls.Load() != 2 || len(tasks) != 1 {
		t.Fatalf("%d ledger attempts, %d tasks; want 2 and the 1 the first attempt stored", calls.Load(), len(tasks))
	}
	if rec.Code != http.StatusAccepted {
		code, msg := errorOf(t, rec)
		t.Fatalf("%d %s %q; want 202 with task %s, which the first attempt created and which holds its price", rec.Code, code, msg, tasks[0].Name)
	}
	var got struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.ID != tasks[0].Name {
		t.Errorf("answer %s: want the task %s", rec.Body, tasks[0].Name)
	}
}

// The interleaving of internal/ledger's TestARefusalAfterAnAttemptInDoubtKeepsTheCallInDoubt,
// seen by the client: the first attempt landed and went unanswered, the manager elected next
// does not count the task yet (a deposed manager's late create) and the balance it sees is
// short. A keyed client was told 402 (its key free, nothing created); it must be told to retry
// with the key, and the retry replays the task. A keyless one was told 402 and its task ran.
func TestACreateRefusedOnARetryAfterAnUnansweredAttemptIsNotA402(t *testing.T) {
	short := ledgerAnswer(http.StatusPaymentRequired, `{"error":{"code":"insufficient_balance","message":"short","required":10}}`)
	for _, key := range []string{"key-1", ""} {
		s, c, use := hopServer(t)
		l, _ := hopLedger(t, c, short)
		use(l)
		rec := postShort(s, key)
		code, msg := errorOf(t, rec)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("key %q: %d %s %q; want 503 (the task may have been created: it was)", key, rec.Code, code, msg)
		}
		if len(tasksOf(t, c)) != 1 {
			t.Fatalf("key %q: want the 1 task of the first attempt", key)
		}
		if key == "" {
			continue
		}
		retry := postShort(s, key)
		if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry with the key: %d %s; want 200, the replay of the task the first attempt made", retry.Code, retry.Body)
		}
	}
}
