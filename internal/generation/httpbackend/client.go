// Package httpbackend is the operator's side of the HTTP backend protocol
// (docs/backend-protocol.md): a generation.Backend that submits, observes and cancels stages on
// any server that speaks it. The wire types are in generation/protocol.
package httpbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/utils/clock"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/protocol"
	"github.com/videogen-dev/videogen-operator/internal/retryafter"
)

// Config says where the backend is and how patiently to talk to it.
type Config struct {
	// BaseURL of the backend, e.g. "http://videogen-worker.videogen-system.svc:8080".
	BaseURL string
	// Token, if set, is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTPClient defaults to a plain http.Client: the backend is chosen by the operator, so
	// unlike caller-supplied URLs it needs no SSRF guard.
	HTTPClient *http.Client
	// RequestTimeout bounds each attempt (default 15s).
	RequestTimeout time.Duration
	// MaxAttempts is how often one call is tried on 5xx and network errors (default 4).
	MaxAttempts int
	// BaseDelay and MaxDelay bound the exponential backoff between attempts (default 250ms, 4s).
	BaseDelay, MaxDelay time.Duration
	// Clock times the waits between attempts (default the real clock).
	Clock clock.WithTicker
}

// MaxIdleConnsPerHost is how many connections to a backend the default HTTP client keeps open
// between calls: the manager's task workers poll a backend all at once, and net/http's default
// of 2 would close and dial the others for every round.
const MaxIdleConnsPerHost = 64

// Client is a generation.Backend over the HTTP backend protocol.
type Client struct {
	cfg  Config
	base *url.URL
}

var _ generation.Backend = (*Client)(nil)

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("backend base URL %q must be an absolute http(s) URL", cfg.BaseURL)
	}
	if cfg.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxIdleConnsPerHost, MaxIdleConnsPerHost
		cfg.HTTPClient = &http.Client{Transport: t}
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 15 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = 250 * time.Millisecond
	}
	if cfg.MaxDelay < cfg.BaseDelay {
		cfg.MaxDelay = max(4*time.Second, cfg.BaseDelay)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Client{cfg: cfg, base: base}, nil
}

// Server implements generation.Server: the base URL, without any user information, query or
// fragment in it (the task's status, which its namespace's users may read, records it). A
// stage's handle is this server's id for it, which another server may give another stage.
func (c *Client) Server() string {
	u := *c.base
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// Submit implements generation.Backend. A 4xx answer means the backend refused the input, so
// the error is permanent; only an authentication problem, throttling or an answer that is not
// the backend's (Foreign) is worth waiting out.
func (c *Client) Submit(ctx context.Context, w generation.Work) (string, error) {
	var st stageAnswer
	err := c.call(ctx, http.MethodPost, protocol.StagesPath, requestFor(w), &st)
	var se *StatusError
	if errors.As(err, &se) && se.Refused() {
		return "", generation.Refused(err, se.Message)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// JSON, but a field of the wrong type (a numeric id, say): every Submit under the key
		// is answered so, as an outage would be retried until the task's timeout. The stage
		// the backend may have started is stopped by its key (see too long an id, below).
		field := te.Field[strings.LastIndex(te.Field, ".")+1:]
		return c.brokenAnswer(ctx, w.Key, err, fmt.Sprintf("its %s holds a JSON %s where the protocol has another type", field, te.Value))
	}
	if err != nil {
		return "", err
	}
	if st.ID == "" {
		return "", fmt.Errorf("backend accepted the %s stage without a stage id", w.Stage)
	}
	if len(st.ID) > protocol.MaxIDBytes {
		// Every look would name it (a proxy's 414, a Go server's 431) and the task's status
		// would store it: the answer breaks the protocol. The stage the backend started is
		// stopped by its key, since no handle of it will reach the status.
		return c.brokenAnswer(ctx, w.Key, fmt.Errorf("backend answered POST %s with a stage id of %d bytes (at most %d)", protocol.StagesPath, len(st.ID), protocol.MaxIDBytes),
			fmt.Sprintf("the stage id it gave is %d bytes long (at most %d)", len(st.ID), protocol.MaxIDBytes))
	}
	if st.Key != "" && st.Key != w.Key {
		// The same key always names the same stage: an answer with another key's stage breaks
		// the idempotency Submit rests on (its first look would find the other key, lost, and
		// every submission again the same). Whatever it started for ours is stopped by our key.
		return c.brokenAnswer(ctx, w.Key, fmt.Errorf("backend answered POST %s with the stage %q of another key", protocol.StagesPath, st.ID),
			"it answered the stage's submission with the stage of another key")
	}
	if why := protocol.ReservedID(st.ID); why != "" {
		// Every look would ask another path (read as a lost stage, submitted again and answered
		// with the same id), and a cancel by it would name no stage: stopped by its key.
		return c.brokenAnswer(ctx, w.Key, fmt.Errorf("backend answered POST %s with the stage id %q, %s", protocol.StagesPath, st.ID, why),
			fmt.Sprintf("the stage id it gave, %q, is %s", st.ID, why))
	}
	return st.ID, nil
}

// brokenAnswer refuses for good a Submit answer that breaks the protocol (every Submit under
// the key would be answered so), saying why, after stopping by its key whatever the backend
// started for it: no handle of it will reach the task's status.
func (c *Client) brokenAnswer(ctx context.Context, key string, err error, why string) (string, error) {
	_ = c.cancelByKey(ctx, key)
	return "", generation.Refused(err, "the backend's answer does not follow the protocol: "+why)
}

// Observe implements generation.Backend. A stage the backend does not know (a 404 in the
// protocol's shape; a bare one is another server's, see Foreign) will never finish under that
// handle, so that error is permanent, and says the stage was lost (generation.ErrStageLost): a
// worker keeps its stages in memory and forgets them when it restarts, and the controller may
// submit the stage again under its key. So is an answer whose key is not w's: the id was given
// to another stage since.
func (c *Client) Observe(ctx context.Context, w generation.Work, handle string) (generation.Observation, error) {
	var st stageAnswer
	err := c.call(ctx, http.MethodGet, protocol.StagesPath+"/"+url.PathEscape(handle), nil, &st)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound && !se.Foreign() {
		return generation.Observation{}, generation.Lost(err)
	}
	if errors.As(err, &se) && se.Status == http.StatusRequestURITooLong {
		// The id the backend gave the stage is too long for its URLs (or a proxy's): every
		// look is answered so, as an outage would be retried until the task's timeout.
		return generation.Observation{}, generation.Refused(err,
			"the backend's answer does not follow the protocol: the stage id it gave is too long for GET /v1/stages/{id} (414)")
	}
	if err != nil {
		return generation.Observation{}, err
	}
	if st.Key != "" && st.Key != w.Key {
		// The id names another key's stage now: a backend that restarted and numbers its
		// stages afresh gave it out again. Ours is as unknown to it as after a 404, and the
		// other stage's outputs or result are another task's.
		return generation.Observation{}, generation.Lost(fmt.Errorf("backend answered GET %s/%s with the stage of another key: it no longer knows this stage",
			protocol.StagesPath, url.PathEscape(handle)))
	}
	return observation(st)
}

// Cancel implements generation.Backend; a stage the backend no longer knows is already gone.
// Without a handle (a Submit that landed while the status write recording its id was lost) the
// stage is cancelled by its key, POST /v1/stages/cancel. With one, it is cancelled by its key
// too, which names the stage whatever became of the handle: a backend that restarted forgot
// the id, and the stage submitted again under the key since (its new id's write lost) runs
// under another; one that numbers its stages afresh may have given the id to another key's
// stage, which a cancel by id would stop. Only a backend without that endpoint (404 or 405)
// is asked by id, unless the id answers with another key's stage.
func (c *Client) Cancel(ctx context.Context, w generation.Work, handle string) error {
	if handle == "" {
		return c.cancelByKey(ctx, w.Key)
	}
	if w.Key != "" {
		known, err := c.cancelKey(ctx, w.Key)
		if err != nil || known {
			return err
		}
		var st stageAnswer
		if err := c.call(ctx, http.MethodGet, protocol.StagesPath+"/"+url.PathEscape(handle), nil, &st); err == nil && st.Key != "" && st.Key != w.Key {
			return nil // the id names another stage now; ours is gone
		}
	}
	err := c.call(ctx, http.MethodPost, protocol.StagesPath+"/"+url.PathEscape(handle)+"/cancel", nil, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// cancelByKey stops the stage submitted under key. A backend that does not know the endpoint
// (404 or 405: an older or third-party one) cannot be asked: its stage runs to the deadline
// it was submitted with, which is no error of the caller's.
func (c *Client) cancelByKey(ctx context.Context, key string) error {
	_, err := c.cancelKey(ctx, key)
	return err
}

// cancelKey is cancelByKey, and says whether the backend knows the endpoint.
func (c *Client) cancelKey(ctx context.Context, key string) (known bool, err error) {
	if key == "" {
		return false, nil // nothing names a stage
	}
	err = c.call(ctx, http.MethodPost, protocol.CancelByKeyPath, protocol.CancelRequest{Key: key}, nil)
	var se *StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
		return false, nil
	}
	return err == nil, err
}

func requestFor(w generation.Work) protocol.StageRequest {
	req := protocol.StageRequest{
		Key:                   w.Key,
		Capability:            string(w.Capability),
		Stage:                 string(w.Stage),
		TemplateID:            w.TemplateID,
		TemplateMediaURL:      w.TemplateMediaURL,
		TemplateMediaOfficial: w.TemplateMediaOfficial,
		Inputs:                protocol.Inputs{FaceImageURL: w.Inputs.FaceImageURL, FaceImageUploaded: w.FaceImageUploaded, SourceVideoURL: w.Inputs.SourceVideoURL},
		Duration:              w.Duration,
		Previous:              w.Previous,
		Task:                  &protocol.TaskRef{Namespace: w.Namespace, Name: w.Task, UID: w.TaskUID},
	}
	if !w.Deadline.IsZero() {
		deadline := w.Deadline.UTC()
		req.Deadline = &deadline
	}
	return req
}

// stageAnswer is a stage status as the client reads it: protocol.StageStatus with its progress
// as any JSON number, since the protocol says only "0–100" and a backend may send 42.5 or 100.0,
// which an integer field refuses (every answer of such a backend was an error, its stages polled
// as an outage until their tasks timed out). It is clamped and truncated, as the Job backend's
// progress annotation is.
type stageAnswer struct {
	protocol.StageStatus
	Progress float64 `json:"progress"`
}

func observation(st stageAnswer) (generation.Observation, error) {
	obs := generation.Observation{Progress: int32(min(max(st.Progress, 0), 100)), Message: st.Message}
	switch st.State {
	case protocol.StateRunning:
		obs.State = generation.Running
	case protocol.StateFailed:
		obs.State = generation.Failed
	case protocol.StateSucceeded:
		obs.State, obs.Outputs = generation.Succeeded, st.Outputs
		if st.Result != nil {
			obs.Result = &videogenv1alpha1.TaskResult{URL: st.Result.URL, MediaType: st.Result.MediaType, Metadata: st.Result.Metadata}
		}
	default:
		return generation.Observation{}, fmt.Errorf("backend reported stage %s in unknown state %q", st.ID, st.State)
	}
	return obs, nil
}

// StatusError is a non-2xx answer from the backend.
type StatusError struct {
	Method, Path string
	Status       int
	Code         string
	Message      string
	// RetryAfter is the wait a 429 or 503 asked for in its Retry-After header (0: none).
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	if e.Foreign() && e.Status < 500 {
		msg += ", without the protocol's error body (another server at the backend's address?)"
	}
	return fmt.Sprintf("backend answered %s %s with %d: %s", e.Method, e.Path, e.Status, msg)
}

// Foreign reports whether the answer lacks the protocol's error body, which every error of a
// backend has (docs/backend-protocol.md, Errors): a proxy's page, or another server at the
// backend's address (a Service still routing to a pod IP that a new pod got after the
// backend's restart). It is not the backend's word on the request: it neither refuses a
// submission nor says a stage was lost, and is waited out as an outage.
func (e *StatusError) Foreign() bool { return e.Code == "" }

// Retryable reports whether trying the same request again may succeed.
func (e *StatusError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// Refused reports whether the backend refused the request itself, which no retry can change.
// 401 and 403 are an operator's token problem, not the caller's input, so they are not.
func (e *StatusError) Refused() bool {
	return e.Status >= 400 && e.Status < 500 && !e.Retryable() && !e.Foreign() &&
		e.Status != http.StatusUnauthorized && e.Status != http.StatusForbidden
}

// call sends one request, retrying network errors and retryable statuses with backoff, and
// decodes a 2xx body into out.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, method, path, body, out)
		if err == nil || ctx.Err() != nil || attempt >= c.cfg.MaxAttempts || !retryable(err) {
			return err
		}
		t := c.cfg.Clock.NewTimer(retryWait(err, c.cfg.BaseDelay, c.cfg.MaxDelay, attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (giving up retrying: %v)", err, ctx.Err())
		case <-t.C():
		}
	}
}

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	var de *decodeError
	return !errors.As(err, &de) // network errors and attempt timeouts
}

// decodeError is a 2xx answer that is not the protocol's JSON; retrying will not fix it.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// maxResponseBytes bounds what is read of any answer: status documents are small.
const maxResponseBytes = 1 << 20

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("backend %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("backend %s %s: reading the answer: %w", method, path, err)
	}
	tooLarge := len(data) > maxResponseBytes
	data = data[:min(len(data), maxResponseBytes)]
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Method: method, Path: path, Status: resp.StatusCode, RetryAfter: retryafter.Parse(resp.Header, c.cfg.Clock.Now())}
		var eb protocol.ErrorBody
		if json.Unmarshal(data, &eb) == nil {
			se.Code, se.Message = eb.Error.Code, eb.Error.Message
		}
		return se
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if tooLarge && method == http.MethodGet {
		// Not an outage: the same stage answers the same way at every poll, so the stage fails
		// now rather than at its task's timeout. (A Submit's answer is not made permanent: its
		// stage may run, and only a retried Submit, or the timeout's cancel by key, finds it.)
		return &decodeError{generation.Permanent(fmt.Errorf("backend %s %s: the answer is larger than %d bytes", method, path, maxResponseBytes))}
	}
	if err := json.Unmarshal(data, out); err != nil {
		var te *json.UnmarshalTypeError
		if method == http.MethodGet && errors.As(err, &te) {
			// JSON, but a field of the wrong type (outputs that are not strings, say): the
			// same stage answers the same way at every poll, so the stage fails now, not as
			// an outage at its task's timeout. (Not JSON at all, a proxy's page, say, stays
			// an outage; a Submit's answer is made permanent by Submit, which stops its stage
			// by key first.)
			field := te.Field[strings.LastIndex(te.Field, ".")+1:]
			return &decodeError{generation.Refused(fmt.Errorf("backend %s %s: the answer does not follow the protocol: %w", method, path, err),
				fmt.Sprintf("the backend's answer does not follow the protocol: its %s holds a JSON %s where the protocol has another type", field, te.Value))}
		}
		return &decodeError{fmt.Errorf("backend %s %s: the answer is not a protocol document: %w", method, path, err)}
	}
	return nil
}
