package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

const (
	// AnnotationRequestHash fingerprints the request that created a task, so a replay with the
	// same Idempotency-Key can be told from a reuse with a different body.
	AnnotationRequestHash = "videogen.dev/request-hash"
	// LabelCreatedBy marks tasks created through the REST API.
	LabelCreatedBy = "videogen.dev/created-by"
	// HeaderIdempotencyKey makes a task-creating POST safe to retry.
	HeaderIdempotencyKey = "Idempotency-Key"
)

var taskIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// submit runs the shared path of every task-creating POST:
// decode → validate → replay check → price → store inputs → the ledger freezes and creates.
// A validation error or a 402 happens before anything is frozen or created, so it changes
// nothing and leaves the Idempotency-Key free. An inline face stored for a task the ledger
// then did not create is removed (faces.go).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, p apikeys.Principal, body any, validate func() (taskInput, error)) {
	key, err := idempotencyKey(r)
	if err == nil {
		err = decodeJSON(w, r, s.cfg.MaxBodyBytes, body)
	}
	var in taskInput
	if err == nil {
		in, err = validate()
	}
	if err != nil {
		if !writeRequestError(w, r, err) {
			s.internalError(w, r, err)
		}
		return
	}
	hash := requestHash(r.URL.Path, body)
	name := taskName(p.Account, key)
	ctx := r.Context()

	if key != "" {
		// With an inline face, ask around the cache too: a retry whose task the cache has not
		// seen yet would store its face before the ledger says the task exists, and a reuse of
		// the key with another face would leave that face stored behind its 422.
		if s.replay(ctx, w, r, p.Account, name, hash, true) || (in.face != nil && s.replay(ctx, w, r, p.Account, name, hash, false)) {
			return
		}
	}

	tmpl, price, err := s.quote(ctx, p, &in)
	if err != nil {
		// The template may have gone, or its terms changed, since the key's task was created:
		// a retry whose task the cache has not seen yet is its replay all the same (the ledger,
		// which would say the task exists, is not asked), never a 400 saying nothing was made.
		if key != "" && s.replay(ctx, w, r, p.Account, name, hash, false) {
			return
		}
		if !writeRequestError(w, r, err) {
			s.internalError(w, r, err)
		}
		return
	}
	if in.face != nil {
		// Refuse a short balance before the image is stored (the ledger decides again below).
		// With an Idempotency-Key and open tasks, one of them may be this key's own, admitted
		// and still being created (the replay checks above cannot see it yet) and counted in
		// the balance: the ledger checks the task's name before the balance (409, then the
		// replay), so it decides; a 402 from it keeps the face for the sweep, as any keyed one.
		// The figures say nothing of the account's standing, which the ledger checks before the
		// balance: a suspended or closing account is left to it (403, not "ask for a top-up").
		f, err := s.cfg.Ledger.Balance(ctx, p.Account)
		switch {
		case err == nil && f.Balance < price && (key == "" || f.Holds == 0) && !s.notAccepting(ctx, p.Account):
			s.admissionRefused(ctx, w, r, p.Account, name, hash, key != "", &ledger.InsufficientBalanceError{Required: price, Available: max(f.Balance, 0)})
			return
		case errors.Is(err, ledger.ErrNoAnswer), errors.Is(err, ledger.ErrNotReady):
			// The create would wait for the ledger as long again: answer now, nothing stored.
			s.admissionRefused(ctx, w, r, p.Account, name, hash, key != "", err)
			return
		}
	}
	task, err := s.buildTask(ctx, p.Account, name, hash, &in, tmpl)
	if errors.Is(err, blobstore.ErrFull) {
		// The store is at its bound (--blob-dir-max-bytes): nothing was stored or frozen, and
		// the sweep frees the faces of tasks gone. A face given by URL needs no storage.
		s.cfg.Logger.WarnContext(ctx, "refusing an inline face: the blob store is full", "request_id", httpjson.RequestID(ctx), "error", err.Error())
		w.Header().Set("Retry-After", "60")
		httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable,
			"the service's storage for uploaded images is full; retry later, or give the face as an http(s) URL")
		return
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	// The ledger (in the elected manager) admits the price and creates the task: the create is
	// the freeze, and 402 is decided with every admitted task counted, whichever replica asks.
	created, err := s.cfg.Ledger.CreateTask(ctx, task, price)
	if key == "" && errors.Is(err, ledger.ErrTaskExists) {
		// Without a key the name is this request's own (random): the task of that name is an
		// earlier attempt of this very call, which got no answer in time and was sent again.
		// Stored, it is this request's task (read around the cache: it is seconds old); else it
		// may still be being created: no key is in use, the create is in doubt.
		landed := &videogenv1alpha1.VideoTask{}
		if s.readStored(ctx, client.ObjectKeyFromObject(task), landed) == nil && landed.Annotations[AnnotationRequestHash] == hash {
			created, err = landed, nil
		} else {
			err = fmt.Errorf("%w: an earlier attempt of this request is being created (%v)", ledger.ErrNoAnswer, err)
		}
	}
	if err != nil {
		if in.face != nil && s.faceUnused(ctx, p.Account, name, in.faceBlob, key != "", err) {
			s.removeFace(ctx, in.faceBlob)
		}
		s.admissionRefused(ctx, w, r, p.Account, name, hash, key != "", err)
		return
	}
	httpjson.WriteJSON(w, http.StatusAccepted, taskview.Of(created))
}

// notAccepting reports whether the cache shows the account suspended or being deleted, which
// the ledger refuses with 403 whatever the balance.
func (s *Server) notAccepting(ctx context.Context, account string) bool {
	acct := &videogenv1alpha1.PointAccount{}
	if s.cfg.Client.Get(ctx, client.ObjectKey{Namespace: account, Name: videogenv1alpha1.PointAccountName}, acct) != nil {
		return false
	}
	return acct.Spec.Suspended || !acct.DeletionTimestamp.IsZero()
}

// replay answers a request whose Idempotency-Key already made a task: 200 with that task for
// the same body, 422 for another body. It reports whether it answered. cached asks the cache
// first, so that a new key costs no read around it; a task found there is answered as the
// kube-apiserver has it: the cache may still hold a task of a namespace of this name deleted
// since (another tenant's: a keyed task's name is derived from the account's name and the key).
// A read that fails is answered too (503 while the cluster does not answer): going on, the
// request would meet its own task's name taken and be told the key is in use.
func (s *Server) replay(ctx context.Context, w http.ResponseWriter, r *http.Request, account, name, hash string, cached bool) bool {
	key := client.ObjectKey{Namespace: account, Name: name}
	if cached && s.cfg.Client.Get(ctx, key, &videogenv1alpha1.VideoTask{}) != nil {
		return false
	}
	task := &videogenv1alpha1.VideoTask{}
	err := s.readStored(ctx, key, task)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		s.internalError(w, r, err)
	default:
		answerReplay(w, r, task, hash, taskview.Of(task))
	}
	return true
}

// answerReplay answers a request whose Idempotency-Key already made obj: 200 with view and
// Idempotent-Replayed for the same body (obj's request hash), 422 for another.
func answerReplay(w http.ResponseWriter, r *http.Request, obj metav1.Object, hash string, view any) {
	if obj.GetAnnotations()[AnnotationRequestHash] != hash {
		httpjson.WriteError(w, r, http.StatusUnprocessableEntity, httpjson.CodeIdempotencyKeyReused,
			"this Idempotency-Key was already used for another request (a different body, or another endpoint); use a new key for a new request")
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	httpjson.WriteJSON(w, http.StatusOK, view)
}

// admissionRefused answers a task the ledger did not create (or may have: keyed says whether
// a retry can find it).
func (s *Server) admissionRefused(ctx context.Context, w http.ResponseWriter, r *http.Request, account, name, hash string, keyed bool, err error) {
	var short *ledger.InsufficientBalanceError
	var refused *ledger.RefusedError
	switch {
	case errors.As(err, &short):
		httpjson.WriteError(w, r, http.StatusPaymentRequired, httpjson.CodeInsufficientBalance,
			fmt.Sprintf("insufficient balance: this task costs %d points and %d are available; ask your administrator for a top-up",
				short.Required, short.Available))
	case errors.Is(err, ledger.ErrAccountSuspended):
		httpjson.WriteError(w, r, http.StatusForbidden, "account_suspended", "this account is suspended; contact your administrator")
	case errors.Is(err, ledger.ErrAccountClosing):
		httpjson.WriteError(w, r, http.StatusForbidden, "account_closing", "this account is being closed and takes no new tasks; contact your administrator")
	case errors.Is(err, ledger.ErrAccountNotFound):
		httpjson.WriteError(w, r, http.StatusForbidden, "account_not_found", "this API key's account has no points account; contact your administrator")
	case errors.As(err, &refused) && refused.Status == http.StatusForbidden:
		// The kube-apiserver refused the create (a ResourceQuota of the namespace used up, an
		// admission policy): nothing was created or frozen, and retrying as is will not help.
		httpjson.WriteError(w, r, http.StatusForbidden, httpjson.CodeCreateRefused, refused.Message+"; contact your administrator")
	case errors.As(err, &refused):
		// Another refusal of the request's (the kube-apiserver found the task invalid): nothing
		// was created or frozen.
		httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest, refused.Message)
	case errors.Is(err, ledger.ErrTaskExists):
		// A task of this name exists (a request with this key won a race, or our cache has not
		// seen it yet): answer as its replay, read around the cache.
		switch {
		case s.replay(ctx, w, r, account, name, hash, false):
		case errors.Is(err, ledger.ErrNoAnswer):
			// The name is taken by this call's own earlier attempt (ledger.Client retried one
			// that got no answer), whose create is still on its way: no other request has the
			// key, and the create may land.
			noAnswer(w, r, keyed)
		default:
			// A create takes milliseconds: the header a client's retry logic reads, as on the
			// short-template 409.
			w.Header().Set("Retry-After", "1")
			httpjson.WriteError(w, r, http.StatusConflict, httpjson.CodeIdempotencyKeyInUse,
				"a request with this Idempotency-Key is still being processed; retry shortly")
		}
	case errors.Is(err, ledger.ErrNotReady):
		w.Header().Set("Retry-After", "5")
		msg := notReadyMessage(err)
		if keyed {
			msg += " (with the same Idempotency-Key)"
		}
		httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable, msg)
	case errors.Is(err, ledger.ErrNoAnswer):
		noAnswer(w, r, keyed)
	default:
		s.internalError(w, r, err)
	}
}

// noAnswer answers a create the ledger may have made: the same key finds it. A keyless request
// cannot be matched to its task (a late create may show only seconds later), so its client is
// told so.
func noAnswer(w http.ResponseWriter, r *http.Request, keyed bool) {
	msg := "the points ledger did not answer in time; retry shortly (with the same Idempotency-Key)"
	if !keyed {
		msg = "the points ledger did not answer in time and the task may have been created (it can take a few seconds to show in GET /v1/tasks); send an Idempotency-Key to retry a request safely"
	}
	w.Header().Set("Retry-After", "5")
	httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable, msg)
}

// quote resolves the template and prices the task. A fixed-price template ignores a duration
// in the price; a video.template task keeps it all the same, since the duration is what it renders.
func (s *Server) quote(ctx context.Context, p apikeys.Principal, in *taskInput) (catalog.Template, int64, error) {
	tmpl, err := catalog.Resolve(ctx, s.accountReader(p), p.Account, in.capability, in.templateID)
	if errors.Is(err, catalog.ErrTemplateNotFound) && in.templateID != "" {
		tmpl, err = catalog.Resolve(ctx, s.cfg.APIReader, p.Account, in.capability, in.templateID) // just created?
	}
	var wrong *catalog.WrongCapabilityError
	switch {
	case errors.Is(err, catalog.ErrTemplateNotFound):
		return tmpl, 0, badRequest("field \"template_id\": no template %s is available to this account", httpjson.Echo(in.templateID))
	case errors.As(err, &wrong):
		return tmpl, 0, badRequest("field \"template_id\": %v", err)
	case err != nil:
		return tmpl, 0, err
	}
	if !tmpl.Terms.Adjustable && !in.capability.HasDuration() {
		in.duration = nil
	}
	price, err := pricing.Quote(tmpl.Terms, in.duration, s.cfg.DefaultPrice)
	if err != nil {
		return tmpl, 0, badRequest("field \"duration\": %v", err)
	}
	return tmpl, price, nil
}

// buildTask makes the VideoTask (the ledger adds the signed admission of its price, which a
// replay or a GET before the controller writes status.cost shows as the cost).
func (s *Server) buildTask(ctx context.Context, account, name, hash string, in *taskInput, tmpl catalog.Template) (*videogenv1alpha1.VideoTask, error) {
	annotations := map[string]string{AnnotationRequestHash: hash}
	if in.face != nil {
		// Named by the task and the bytes: requests with one Idempotency-Key that all miss the
		// replay check store one object between them.
		in.faceBlob = blobstore.ContentName(name, in.face.ContentType, in.face.Data)
		url, err := s.cfg.Blobs.Put(ctx, in.faceBlob, in.face.ContentType, in.face.Data)
		if err != nil {
			return nil, fmt.Errorf("storing the face image: %w", err)
		}
		in.faceURL = url
		// The caller never saw that URL: a failure to read it back is told without it.
		annotations[videogenv1alpha1.AnnotationFaceImageUploaded] = "true"
	}
	return &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   account,
			Name:        name,
			Labels:      map[string]string{LabelCreatedBy: "apiserver"},
			Annotations: annotations,
		},
		Spec: videogenv1alpha1.VideoTaskSpec{
			Capability:  in.capability,
			TemplateRef: tmpl.ID,
			Inputs:      videogenv1alpha1.TaskInputs{FaceImageURL: in.faceURL, SourceVideoURL: in.videoURL},
			Duration:    in.duration,
			WebhookURL:  in.webhookURL,
		},
	}, nil
}

// idempotencyKey returns the request's Idempotency-Key ("" if none) or a 400.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(HeaderIdempotencyKey)
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 {
		return "", badRequest("send one Idempotency-Key header, not %d", len(vals))
	}
	k := vals[0]
	if k == "" || len(k) > 255 || strings.IndexFunc(k, func(c rune) bool { return c < 0x21 || c > 0x7e }) >= 0 {
		return "", badRequest("Idempotency-Key must be 1 to 255 visible ASCII characters")
	}
	return k, nil
}

// taskName is the task's name (and public id). With an Idempotency-Key it is derived from the
// account and key, so every request with that key meets at the same object and the same hold.
func taskName(account, key string) string {
	if key == "" {
		var b [15]byte
		_, _ = rand.Read(b[:])
		return "vt-" + taskIDEncoding.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(account + "\x00" + key))
	return "vt-" + taskIDEncoding.EncodeToString(sum[:15])
}

// requestHash fingerprints the endpoint and the decoded body (so formatting does not matter).
func requestHash(path string, body any) string {
	canonical, _ := json.Marshal(body)
	sum := sha256.Sum256(append([]byte(path+"\n"), canonical...))
	return hex.EncodeToString(sum[:])
}
