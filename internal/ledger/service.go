package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/transport"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/kubeerr"
)

// The REST apiserver replicas reach the ledger in the elected manager over HTTP:
//
//	POST /ledger/v1/namespaces/{namespace}/tasks   {"price": n, "task": {VideoTask}} → 201 VideoTask
//	GET  /ledger/v1/namespaces/{namespace}/balance → 200 Figures
//
// Errors are {"error": {"code", "message", "required", "available"}} with the codes below.
const (
	codeNotReady            = "not_ready"            // 503: not the elected manager, or still building its books
	codeInsufficientBalance = "insufficient_balance" // 402
	codeAccountNotFound     = "account_not_found"    // 404
	codeAccountSuspended    = "account_suspended"    // 403
	codeAccountClosing      = "account_closing"      // 403
	codeTaskExists          = "task_exists"          // 409
	codeInDoubt             = "in_doubt"             // 503: the create may have landed; a read will say (the name finds it)
	codeInvalid             = "invalid_request"      // 400
	codeCreateRefused       = "create_refused"       // 403: the kube-apiserver refused the create (a quota, an admission policy)
	codeInternal            = "internal_error"       // 500
)

// maxRequestBytes bounds a create request: a task object is a few KiB at most.
const maxRequestBytes = 1 << 20

type createRequest struct {
	Price int64                       `json:"price"`
	Task  *videogenv1alpha1.VideoTask `json:"task"`
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Required  int64  `json:"required,omitempty"`
		Available int64  `json:"available,omitempty"`
		// Reason of a not_ready: NotReadyElecting, NotReadyAccount or NotReadyBusy.
		Reason string `json:"reason,omitempty"`
	} `json:"error"`
}

// Handler serves the ledger to the REST apiserver replicas. Put authentication in front of it
// (the manager uses the kube-apiserver's TokenReview and SubjectAccessReview).
func Handler(l *Ledger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ledger/v1/namespaces/{namespace}/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req createRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Task == nil {
			writeError(w, http.StatusBadRequest, codeInvalid, fmt.Sprintf("the body must be {\"price\": n, \"task\": {…}}: %v", err), nil)
			return
		}
		if req.Task.Namespace != r.PathValue("namespace") {
			writeError(w, http.StatusBadRequest, codeInvalid, "the task's namespace is not the path's", nil)
			return
		}
		// What the caller sent wrong is a 400, not a 500 from deep in CreateTask.
		if req.Price < 0 || req.Task.Name == "" {
			writeError(w, http.StatusBadRequest, codeInvalid, "a task needs a name and a price of 0 or more", nil)
			return
		}
		task, err := l.CreateTask(r.Context(), req.Task, req.Price)
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, task)
	})
	mux.HandleFunc("GET /ledger/v1/namespaces/{namespace}/balance", func(w http.ResponseWriter, r *http.Request) {
		f, err := l.Balance(r.Context(), r.PathValue("namespace"))
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, f)
	})
	return mux
}

func writeLedgerError(w http.ResponseWriter, err error) {
	var short *InsufficientBalanceError
	switch {
	case errors.As(err, &short):
		writeError(w, http.StatusPaymentRequired, codeInsufficientBalance, err.Error(), short)
	case errors.Is(err, errCreateInDoubt):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeInDoubt, err.Error(), nil)
	case errors.Is(err, ErrNotReady) || apierrors.IsTooManyRequests(err):
		// A 429 of the kube-apiserver: shed before it was handled, nothing stored; the
		// replica's client asks again, as during a failover.
		w.Header().Set("Retry-After", "1")
		writeNotReady(w, NotReadyReason(err), err.Error())
	case errors.Is(err, ErrAccountNotFound):
		writeError(w, http.StatusNotFound, codeAccountNotFound, err.Error(), nil)
	case errors.Is(err, ErrAccountSuspended):
		writeError(w, http.StatusForbidden, codeAccountSuspended, err.Error(), nil)
	case errors.Is(err, ErrAccountClosing):
		writeError(w, http.StatusForbidden, codeAccountClosing, err.Error(), nil)
	case errors.Is(err, ErrTaskExists):
		writeError(w, http.StatusConflict, codeTaskExists, err.Error(), nil)
	case apierrors.IsForbidden(err) || kubeerr.RefusedByAdmission(err):
		// A ResourceQuota of the namespace is used up, or an admission webhook or policy said
		// no (a policy without a reason says it as an Invalid): nothing was stored
		// (requestRefused), and it is the namespace's, not the service's.
		writeError(w, http.StatusForbidden, codeCreateRefused, "the cluster refused to create the task: "+statusMessage(err), nil)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		writeError(w, http.StatusBadRequest, codeInvalid, err.Error(), nil) // the kube-apiserver refused the task
	default:
		writeError(w, http.StatusInternalServerError, codeInternal, err.Error(), nil)
	}
}

// statusMessage is the kube-apiserver's message in err (err's own text if it has none).
func statusMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Message != "" {
		return st.Status().Message
	}
	return err.Error()
}

func writeError(w http.ResponseWriter, status int, code, msg string, short *InsufficientBalanceError) {
	var body errorBody
	body.Error.Code, body.Error.Message = code, msg
	if short != nil {
		body.Error.Required, body.Error.Available = short.Required, short.Available
	}
	writeJSON(w, status, body)
}

// writeNotReady answers 503 not_ready, saying why (a NotReady reason).
func writeNotReady(w http.ResponseWriter, reason, msg string) {
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Reason = codeNotReady, msg, reason
	writeJSON(w, http.StatusServiceUnavailable, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Client is the REST apiserver's way to the ledger. It retries while no manager answers as the
// elected one (a failover takes seconds), for up to Deadline (15 s) in all. A create is safe to
// retry: its task's name is fixed, so a repeat finds the task (ErrTaskExists) instead of making
// a second. A call whose attempts all failed is ErrNoAnswer if any of them reached a manager
// and got no answer (the create may have landed), ErrNotReady otherwise (nothing was created);
// after such an attempt, a later one's refusal is ErrNoAnswer too, and ErrTaskExists is both
// (the name may be taken by that attempt's own create, still on its way).
type Client struct {
	// URL of the ledger: the manager's --ledger-bind-address, or the Service in front of it.
	URL string
	// HTTP client (default: 10 s timeout per attempt, and keep-alive connections for
	// MaxIdleConnsPerHost concurrent calls).
	HTTP *http.Client
	// TokenFile, if set, holds the bearer token sent (a service account token; re-read as it rotates).
	TokenFile string
	// Backoff between attempts while the ledger is not ready or unreachable: the delays grow by
	// Factor up to Cap and stay there; Steps bounds the attempts (default DefaultBackoff).
	Backoff wait.Backoff
	// Deadline bounds a call, its attempts and the waits between them together (default
	// DefaultDeadline): a hung manager costs the caller this long, not attempts × HTTP timeout.
	Deadline time.Duration

	setup  sync.Once
	hc     *http.Client
	tokens transport.ResettableTokenSource
}

// MaxIdleConnsPerHost is how many connections to the ledger a default Client keeps open
// between calls. Every submission is one call; with net/http's default of 2, concurrent
// submissions would close and dial connections all the time.
const MaxIdleConnsPerHost = 256

// init sets up the HTTP client and the token source once (calls run concurrently).
func (c *Client) init() {
	c.setup.Do(func() {
		c.hc = c.HTTP
		if c.hc == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxIdleConnsPerHost, MaxIdleConnsPerHost
			c.hc = &http.Client{Timeout: 10 * time.Second, Transport: t}
		}
		if c.TokenFile != "" {
			c.tokens = transport.NewCachedFileTokenSource(c.TokenFile)
		}
	})
}

// DefaultBackoff waits 100 ms after the first attempt, then half as long again each time up to
// 2 s, and goes on every 2 s until the call's Deadline (15 s by default) ends it: Steps (at
// most this many attempts) is no bound that a call reaches.
var DefaultBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 1000, Cap: 2 * time.Second}

// DefaultDeadline is how long a call may take in all: about a failover (docs/api.md).
const DefaultDeadline = 15 * time.Second

// CreateTask asks the ledger to admit and create task at price (Ledger.CreateTask).
func (c *Client) CreateTask(ctx context.Context, task *videogenv1alpha1.VideoTask, price int64) (*videogenv1alpha1.VideoTask, error) {
	body, err := json.Marshal(createRequest{Price: price, Task: task})
	if err != nil {
		return nil, err
	}
	out := &videogenv1alpha1.VideoTask{}
	return out, c.call(ctx, http.MethodPost, "/ledger/v1/namespaces/"+url.PathEscape(task.Namespace)+"/tasks", body, http.StatusCreated, out)
}

// Balance returns an account's figures as the ledger has them now.
func (c *Client) Balance(ctx context.Context, namespace string) (Figures, error) {
	var f Figures
	return f, c.call(ctx, http.MethodGet, "/ledger/v1/namespaces/"+url.PathEscape(namespace)+"/balance", nil, http.StatusOK, &f)
}

func (c *Client) call(ctx context.Context, method, path string, body []byte, want int, out any) error {
	c.init()
	backoff := c.Backoff
	if backoff.Steps == 0 {
		backoff = DefaultBackoff
	}
	deadline := c.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	callCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	// Not wait.ExponentialBackoffWithContext: it stops once the delay reaches Cap (Backoff.Step
	// sets Steps to 0 there), long before the deadline. Here the delays stay at Cap and the
	// deadline (or Steps attempts) ends the retries.
	delay := backoff.DelayFunc()
	var last, doubt error
	for attempt := 1; ; attempt++ {
		last = c.once(callCtx, method, path, body, want, out)
		if last != nil && !retriable(last) && doubt != nil && method != http.MethodGet {
			// An earlier attempt may have landed (a manager that took it and died, whose task
			// the manager answering now does not count yet): a refusal now (a short balance
			// without that task's hold, a quota its task used up) says nothing of it. A name
			// taken is most likely that attempt's own create, still on its way: the caller is
			// told both, to answer as a replay if a read finds the task, and as "no answer in
			// time" (not "another request has the key") if it does not.
			if errors.Is(last, ErrTaskExists) {
				return fmt.Errorf("%w (an earlier attempt of this call: %w: %w)", ErrTaskExists, ErrNoAnswer, doubt)
			}
			return fmt.Errorf("%w: %w; a later attempt was answered: %v", ErrNoAnswer, doubt, last)
		}
		if last == nil || !retriable(last) {
			return last
		}
		if doubt == nil && mayHaveLanded(last) {
			doubt = last // this attempt went out and got no answer: a create may have landed
		}
		if attempt >= backoff.Steps || callCtx.Err() != nil {
			break
		}
		t := time.NewTimer(delay())
		select {
		case <-callCtx.Done():
		case <-t.C:
		}
		t.Stop()
		if callCtx.Err() != nil {
			break
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("asking the ledger: %w", ctx.Err()) // the caller gave up
	case doubt != nil:
		// Whatever later attempts found (no manager listening, one not ready), this one may
		// have been acted on: never say "nothing was created" after it.
		if last != doubt {
			return fmt.Errorf("%w (within %v): %w; the last attempt: %v", ErrNoAnswer, deadline, doubt, last)
		}
		return fmt.Errorf("%w (within %v): %w", ErrNoAnswer, deadline, doubt)
	case errors.Is(last, ErrNotReady):
		return last // the ledger said so: a failover or a rebuild is under way
	default:
		return fmt.Errorf("%w: %w", ErrNotReady, last) // no manager listened: one is starting
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, want int, out any) error {
	// Whether the request was written to a connection: an attempt that never had one (a dial
	// that hung on a dead manager's address until the attempt's timeout) reached no manager.
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.tokens != nil {
		tok, err := c.tokens.Token()
		if err != nil {
			return fmt.Errorf("reading the ledger token: %w", err)
		}
		if n := len(tok.AccessToken); n > bearer.MaxTokenBytes {
			// The manager would answer 400 invalid_request, read as this request's refusal.
			return fmt.Errorf("the ledger token in %s is %d bytes; the manager reads none longer than %d", c.TokenFile, n, bearer.MaxTokenBytes)
		}
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &unreachableError{err: err, unsent: !sent.Load()}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRequestBytes))
	if err != nil {
		return &unreachableError{err: err}
	}
	if resp.StatusCode == want {
		err := json.Unmarshal(data, out)
		if syntax := (*json.SyntaxError)(nil); errors.As(err, &syntax) {
			// Cut short (a response delimited by the connection's close, lost mid-body): the
			// status says it was done, nothing else can be read. In doubt, as an answer that
			// never came: a repeat finds the created task's name taken.
			return &unreachableError{err: fmt.Errorf("the ledger's %s answer was cut short (%d bytes): %w", resp.Status, len(data), err)}
		}
		return err
	}
	var e errorBody
	if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			// Not the ledger's own answer but a proxy's (a service mesh's sidecar, an
			// HTTP_PROXY): the request may have reached a manager that took it and died, so
			// it is in doubt, as a connection lost after sending is.
			return &unreachableError{err: fmt.Errorf("the ledger's proxy answered %s", resp.Status)}
		}
		return fmt.Errorf("the ledger answered %s: %.200s", resp.Status, data)
	}
	switch e.Error.Code {
	case codeInsufficientBalance:
		return &InsufficientBalanceError{Required: e.Error.Required, Available: e.Error.Available}
	case codeNotReady:
		return &notReadyError{reason: e.Error.Reason, message: e.Error.Message}
	case codeAccountNotFound:
		return fmt.Errorf("%w: %s", ErrAccountNotFound, e.Error.Message)
	case codeAccountSuspended:
		return ErrAccountSuspended
	case codeAccountClosing:
		return ErrAccountClosing
	case codeTaskExists:
		return ErrTaskExists
	case codeInDoubt:
		// The manager answered, but cannot say whether the create landed: in doubt, as a call
		// it did not answer (not retried: a repeat finds the name taken until a read settles it).
		return fmt.Errorf("%w: %s", ErrNoAnswer, e.Error.Message)
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusUnauthorized && e.Error.Code != codeCallerForbidden {
		// A refusal this client does not know (create_refused, invalid_request, or one added
		// later): the ledger created nothing, and the reason is the request's, not the service's.
		return &RefusedError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return fmt.Errorf("the ledger answered %s: %s", resp.Status, e.Error.Message)
}

// codeCallerForbidden: the manager does not authorize the replica's service account (its
// ledger authentication answers 401 unauthorized or 403 forbidden): the service's fault.
const codeCallerForbidden = "forbidden"

// RefusedError is a 4xx answer of the ledger that none of this package's errors stands for,
// such as create_refused (the kube-apiserver refused the create: a ResourceQuota, an admission
// policy) or invalid_request: nothing was created or frozen.
type RefusedError struct {
	Status        int    // the ledger's HTTP status, 4xx
	Code, Message string // the ledger's error code and message
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the ledger refused the request (%d %s): %s", e.Status, e.Code, e.Message)
}

// unreachableError: no answer came (the manager is restarting, or a failover is under way).
// unsent: the request was never written to a connection.
type unreachableError struct {
	err    error
	unsent bool
}

func (e *unreachableError) Error() string { return "the ledger is unreachable: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// mayHaveLanded: an attempt's request may have reached a manager, which got no answer to it
// back (it hung past the timeout, or closed the connection: a crash after the create landed),
// as opposed to one that found no manager listening (the dial failed, or hung until the timeout:
// nothing was written) or that a manager answered (not ready).
func mayHaveLanded(err error) bool {
	var unreachable *unreachableError
	if !errors.As(err, &unreachable) || unreachable.unsent {
		return false
	}
	return !neverSent(err)
}

// retriable: the ledger is not ready or did not answer; a create is safe to send again. (When
// the caller's context or the call's deadline ends, so do the retries.)
func retriable(err error) bool {
	var unreachable *unreachableError
	return errors.As(err, &unreachable) || errors.Is(err, ErrNotReady)
}
