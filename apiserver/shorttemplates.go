package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/kubeerr"
)

// ShortTemplateView is an account's custom short template.
type ShortTemplateView struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	Name      string    `json:"name"`
	TargetURL string    `json:"target_url"`
	CoverURL  *string   `json:"cover_url"`
	Duration  *int32    `json:"duration"`
	CreatedAt time.Time `json:"created_at"`
}

type shortTemplateRequest struct {
	Name      *string      `json:"name"`
	TargetURL *string      `json:"target_url"`
	CoverURL  *string      `json:"cover_url,omitempty"`
	Duration  *wholeNumber `json:"duration,omitempty"`
}

func viewShortTemplate(st *videogenv1alpha1.ShortTemplate) ShortTemplateView {
	return ShortTemplateView{ID: shortTemplateID(st), Object: "short_template", Name: st.Spec.DisplayName,
		TargetURL: st.Spec.TargetURL, CoverURL: optString(st.Spec.CoverURL), Duration: st.Spec.Duration,
		CreatedAt: st.CreationTimestamp.UTC()}
}

// shortTemplateID is the template's id, "" while it has none a task's template_id can use: a
// ShortTemplate made with kubectl may carry any id label (the controller marks one that is no
// ushort_ id InvalidID), and template_id resolves only ushort_ ids to short templates.
func shortTemplateID(st *videogenv1alpha1.ShortTemplate) string {
	id := st.Labels[videogenv1alpha1.LabelShortTemplateID]
	if !strings.HasPrefix(id, videogenv1alpha1.ShortTemplateIDPrefix) {
		return ""
	}
	return id
}

func sortedShortTemplates(items []videogenv1alpha1.ShortTemplate) []videogenv1alpha1.ShortTemplate {
	sort.Slice(items, func(i, j int) bool {
		if !items[i].CreationTimestamp.Equal(&items[j].CreationTimestamp) {
			return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp)
		}
		return items[i].Name < items[j].Name
	})
	return items
}

func (s *Server) listShortTemplates(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	// The list is whole and takes no parameter: a ?limit= read as absent would answer more than
	// was asked for.
	if _, err := queryParams(r); writeRequestError(w, r, err) {
		return
	}
	var own videogenv1alpha1.ShortTemplateList
	if err := s.accountReader(p).List(r.Context(), &own, client.InNamespace(p.Account)); err != nil {
		s.internalError(w, r, err)
		return
	}
	out := list[ShortTemplateView]{Object: "list", Data: []ShortTemplateView{}}
	for _, st := range sortedShortTemplates(own.Items) {
		if shortTemplateID(&st) != "" && st.DeletionTimestamp.IsZero() {
			out.Data = append(out.Data, viewShortTemplate(&st))
		}
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) createShortTemplate(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	var req shortTemplateRequest
	key, err := idempotencyKey(r)
	// A suspended account is refused whatever it sends, before the body is read.
	if err == nil {
		err = s.refuseSuspended(r.Context(), p.Account)
		if err != nil && key != "" && s.replayBeforeSuspension(w, r, p.Account, key) {
			return
		}
	}
	if err == nil {
		err = decodeJSON(w, r, 64<<10, &req)
	}
	if err == nil {
		var c fieldChecker
		c.required("name", req.Name)
		c.required("target_url", req.TargetURL)
		c.optional("cover_url", req.CoverURL)
		err = c.result()
	}
	spec := videogenv1alpha1.ShortTemplateSpec{}
	if err == nil {
		err = s.applyShortTemplate(&spec, &req)
	}
	if err != nil {
		if !writeRequestError(w, r, err) {
			s.internalError(w, r, err)
		}
		return
	}
	suffix := shortTemplateSuffix(p.Account, key)
	hash := requestHash(r.URL.Path, &req)
	st := &videogenv1alpha1.ShortTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   p.Account,
			Name:        "ushort-" + suffix,
			Labels:      map[string]string{videogenv1alpha1.LabelShortTemplateID: videogenv1alpha1.ShortTemplateIDPrefix + suffix},
			Annotations: map[string]string{AnnotationRequestHash: hash},
		},
		Spec: spec,
	}
	// A template of this key in the cache is answered as read around it: the cache may still
	// hold one deleted a moment ago (DELETE, then a create with the same key), which is no
	// replay, and whose name is free.
	if key != "" && s.cfg.Client.Get(r.Context(), client.ObjectKeyFromObject(st), &videogenv1alpha1.ShortTemplate{}) == nil &&
		s.replayShortTemplate(r.Context(), w, r, s.cfg.APIReader, client.ObjectKeyFromObject(st), hash) {
		return
	}
	if err := s.cfg.Client.Create(r.Context(), st); err != nil {
		if apierrors.IsAlreadyExists(err) && key != "" {
			if !s.replayShortTemplate(r.Context(), w, r, s.cfg.APIReader, client.ObjectKeyFromObject(st), hash) {
				// The template of this key was being deleted: its name is free in a moment.
				w.Header().Set("Retry-After", "1")
				httpjson.WriteError(w, r, http.StatusConflict, httpjson.CodeIdempotencyKeyInUse,
					"the template this Idempotency-Key made is being deleted; retry shortly")
			}
			return
		}
		if apierrors.IsForbidden(err) || kubeerr.RefusedByAdmission(err) {
			shortTemplateForbidden(w, r, "create", err)
			return
		}
		if apierrors.IsInvalid(err) {
			s.shortTemplateRefused(w, r, err)
			return
		}
		landed, ok := s.createLanded(r.Context(), st)
		if !ok {
			s.internalError(w, r, err)
			return
		}
		st = landed
	}
	httpjson.WriteJSON(w, http.StatusCreated, viewShortTemplate(st))
}

// createLanded is st as stored when a create that failed (a 504 "request did not complete
// within requested timeout", a connection dropped after the request was sent) landed all the
// same: without an Idempotency-Key its name is known only to this request, so a 500 would make
// the client's retry a second template.
func (s *Server) createLanded(ctx context.Context, st *videogenv1alpha1.ShortTemplate) (*videogenv1alpha1.ShortTemplate, bool) {
	stored := &videogenv1alpha1.ShortTemplate{}
	if err := s.cfg.APIReader.Get(ctx, client.ObjectKeyFromObject(st), stored); err != nil ||
		stored.Annotations[AnnotationRequestHash] != st.Annotations[AnnotationRequestHash] {
		return nil, false
	}
	return stored, true
}

// shortTemplateField names the request field stored at path of a ShortTemplate: fieldLimits
// ties the text fields to theirs; duration has a range, not a length, so it is not among them.
func shortTemplateField(path string) (string, bool) {
	if path == "spec.duration" {
		return "duration", true
	}
	for _, l := range fieldLimits {
		if l.Resource == "shorttemplates" && l.Path == path {
			return l.Field, true
		}
	}
	return "", false
}

// shortTemplateRefused answers a create or update that the kube-apiserver refused as Invalid.
// applyShortTemplate checks every rule of the CRD, so this is one it missed; the kube message
// names spec fields and quotes the value at length, so it goes to the log, not to the client.
func (s *Server) shortTemplateRefused(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.WarnContext(r.Context(), "short template refused by the cluster's validation",
		"request_id", httpjson.RequestID(r.Context()), "error", err.Error())
	msg := "the short template was refused: check name, target_url, cover_url and duration against the API reference"
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, cause := range status.Status().Details.Causes {
			if field, ok := shortTemplateField(cause.Field); ok {
				msg = fmt.Sprintf("field %q was refused: check it against the API reference", field)
				break
			}
		}
	}
	httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest, msg)
}

// shortTemplateForbidden answers a create or update the kube-apiserver refused as Forbidden: a
// ResourceQuota of the account's namespace used up (count/shorttemplates.videogen.dev), an
// admission webhook or policy (also one refusing as Invalid: kubeerr.RefusedByAdmission), or the
// namespace being terminated. Nothing was stored, and the refusal is the namespace's, as for a
// task (create_refused): the cluster's reason is the answer.
func shortTemplateForbidden(w http.ResponseWriter, r *http.Request, what string, err error) {
	msg := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		msg = status.Status().Message
	}
	httpjson.WriteError(w, r, http.StatusForbidden, httpjson.CodeCreateRefused,
		"the cluster refused to "+what+" the short template: "+msg+"; contact your administrator")
}

// shortTemplateSuffix names a new short template (ushort-<suffix>, id ushort_<suffix>): with an
// Idempotency-Key it is derived from the account and the key, so retries meet at one object.
func shortTemplateSuffix(account, key string) string {
	if key == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte("short-template\x00" + account + "\x00" + key))
	return hex.EncodeToString(sum[:12])
}

// replayBeforeSuspension answers the retry of a create whose template was made before the
// account was suspended, as any replay (a task's is answered before the ledger refuses): a 403
// would say no template was made. It reports whether it answered; for anything else the
// suspension is the answer.
func (s *Server) replayBeforeSuspension(w http.ResponseWriter, r *http.Request, account, key string) bool {
	var req shortTemplateRequest
	if decodeJSON(w, r, 64<<10, &req) != nil {
		return false
	}
	st := &videogenv1alpha1.ShortTemplate{}
	name := client.ObjectKey{Namespace: account, Name: "ushort-" + shortTemplateSuffix(account, key)}
	if err := s.cfg.APIReader.Get(r.Context(), name, st); err != nil || !st.DeletionTimestamp.IsZero() ||
		st.Annotations[AnnotationRequestHash] != requestHash(r.URL.Path, &req) {
		return false
	}
	answerReplay(w, r, st, requestHash(r.URL.Path, &req), viewShortTemplate(st))
	return true
}

// replayShortTemplate answers a create whose Idempotency-Key already made a template: 200 with
// it for the same body, 422 for another. It reports whether it answered.
func (s *Server) replayShortTemplate(ctx context.Context, w http.ResponseWriter, r *http.Request, reader client.Reader, key client.ObjectKey, hash string) bool {
	st := &videogenv1alpha1.ShortTemplate{}
	if err := reader.Get(ctx, key, st); err != nil || !st.DeletionTimestamp.IsZero() {
		return false
	}
	answerReplay(w, r, st, hash, viewShortTemplate(st))
	return true
}

func (s *Server) patchShortTemplate(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	st, ok := s.findShortTemplate(w, r, p)
	if !ok {
		return
	}
	var (
		req  shortTemplateRequest
		body []byte
	)
	err := s.refuseSuspended(r.Context(), p.Account)
	if err == nil {
		body, err = readJSON(w, r, 64<<10, &req)
	}
	nulls := nullFields(body)
	if err == nil {
		var c fieldChecker
		c.optional("name", req.Name)
		c.optional("target_url", req.TargetURL)
		c.optional("cover_url", req.CoverURL)
		for _, name := range []string{"name", "target_url"} {
			if nulls[name] {
				c.fail("field %q cannot be cleared; send a new value", name)
			}
		}
		if req.Name == nil && req.TargetURL == nil && req.CoverURL == nil && req.Duration == nil && !nulls["cover_url"] && !nulls["duration"] {
			c.fail("nothing to change: send one or more of name, target_url, cover_url, duration (null clears cover_url or duration)")
		}
		err = c.result()
	}
	if err == nil {
		err = s.patchSpec(&st.Spec, &req, nulls)
	}
	if err != nil {
		if !writeRequestError(w, r, err) {
			s.internalError(w, r, err)
		}
		return
	}
	// PATCH changes only the fields sent, so apply them to the newest object; a conflict (the
	// controller wrote status meanwhile) is retried on a fresh read.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &videogenv1alpha1.ShortTemplate{}
		if err := s.cfg.APIReader.Get(r.Context(), client.ObjectKeyFromObject(st), fresh); err != nil {
			return err
		}
		if err := s.patchSpec(&fresh.Spec, &req, nulls); err != nil {
			return err
		}
		if err := s.cfg.Client.Update(r.Context(), fresh); err != nil {
			return err
		}
		st = fresh
		return nil
	})
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no short template with id "+httpjson.Echo(r.PathValue("id")))
		case apierrors.IsForbidden(err) || kubeerr.RefusedByAdmission(err):
			shortTemplateForbidden(w, r, "change", err)
		case apierrors.IsInvalid(err):
			s.shortTemplateRefused(w, r, err)
		case apierrors.IsConflict(err):
			httpjson.WriteError(w, r, http.StatusConflict, httpjson.CodeConflict, "the template kept changing while this request ran; retry")
		default:
			landed, ok := s.patchLanded(r.Context(), st, &req, nulls)
			if !ok {
				s.internalError(w, r, err)
				return
			}
			httpjson.WriteJSON(w, http.StatusOK, viewShortTemplate(landed))
		}
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewShortTemplate(st))
}

// patchLanded is st as stored when it already holds what the PATCH asks: an update that failed
// (a 504, a connection dropped after the request was sent) landed all the same, as createLanded
// and deleteLanded answer for the create and the delete, not a 500.
func (s *Server) patchLanded(ctx context.Context, st *videogenv1alpha1.ShortTemplate, req *shortTemplateRequest, nulls map[string]bool) (*videogenv1alpha1.ShortTemplate, bool) {
	stored := &videogenv1alpha1.ShortTemplate{}
	if err := s.cfg.APIReader.Get(ctx, client.ObjectKeyFromObject(st), stored); err != nil || stored.UID != st.UID || !stored.DeletionTimestamp.IsZero() {
		return nil, false
	}
	asked := stored.Spec.DeepCopy()
	if err := s.patchSpec(asked, req, nulls); err != nil || !equality.Semantic.DeepEqual(*asked, stored.Spec) {
		return nil, false
	}
	return stored, true
}

func (s *Server) getShortTemplate(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	st, ok := s.findShortTemplate(w, r, p)
	if !ok {
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewShortTemplate(st))
}

func (s *Server) deleteShortTemplate(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	st, ok := s.findShortTemplate(w, r, p)
	if !ok {
		return
	}
	switch err := s.cfg.Client.Delete(r.Context(), st); {
	case apierrors.IsNotFound(err):
		// Gone already (a DELETE a moment ago, which the cache has not seen): the answer a
		// DELETE gets once the cache has, not a second 204.
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no short template with id "+httpjson.Echo(r.PathValue("id")))
	case err != nil && !s.deleteLanded(r.Context(), st):
		s.internalError(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// deleteLanded reports whether a delete that failed (a 504, a connection dropped after the
// request was sent) landed all the same: st is gone (a template of its name made since has
// another UID) or being deleted. A 500 would make the client's retry a 404.
func (s *Server) deleteLanded(ctx context.Context, st *videogenv1alpha1.ShortTemplate) bool {
	stored := &videogenv1alpha1.ShortTemplate{}
	err := s.cfg.APIReader.Get(ctx, client.ObjectKeyFromObject(st), stored)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && (stored.UID != st.UID || !stored.DeletionTimestamp.IsZero())
}

// findShortTemplate finds the caller's template by id; another account's id is 404, never 403.
func (s *Server) findShortTemplate(w http.ResponseWriter, r *http.Request, p apikeys.Principal) (*videogenv1alpha1.ShortTemplate, bool) {
	id := r.PathValue("id")
	var st *videogenv1alpha1.ShortTemplate
	err := catalog.ErrTemplateNotFound // an id label that is no ushort_ id (kubectl) names none
	if strings.HasPrefix(id, videogenv1alpha1.ShortTemplateIDPrefix) {
		st, err = catalog.FindShortTemplate(r.Context(), s.accountReader(p), p.Account, id)
		if errors.Is(err, catalog.ErrTemplateNotFound) {
			st, err = catalog.FindShortTemplate(r.Context(), s.cfg.APIReader, p.Account, id)
		}
	}
	switch {
	case errors.Is(err, catalog.ErrTemplateNotFound):
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no short template with id "+httpjson.Echo(id))
		return nil, false
	case err != nil:
		s.internalError(w, r, err)
		return nil, false
	}
	return st.DeepCopy(), true
}

// patchSpec is applyShortTemplate for a PATCH: the fields sent as null are cleared too.
func (s *Server) patchSpec(spec *videogenv1alpha1.ShortTemplateSpec, req *shortTemplateRequest, nulls map[string]bool) error {
	if nulls["cover_url"] {
		spec.CoverURL = ""
	}
	if nulls["duration"] {
		spec.Duration = nil
	}
	return s.applyShortTemplate(spec, req)
}

// applyShortTemplate copies the present fields of req into spec, checking URLs and duration.
func (s *Server) applyShortTemplate(spec *videogenv1alpha1.ShortTemplateSpec, req *shortTemplateRequest) error {
	if req.Name != nil {
		name := strings.TrimSpace(*req.Name)
		if err := lengthError("name", name, maxNameLength); err != nil {
			return err
		}
		if err := displayName(name); err != nil {
			return err
		}
		spec.DisplayName = name
	}
	if req.TargetURL != nil {
		u, err := checkURL(s.cfg.URLPolicy, "target_url", strings.TrimSpace(*req.TargetURL))
		if err != nil {
			return err
		}
		spec.TargetURL = u
	}
	if req.CoverURL != nil {
		u, err := checkURL(s.cfg.URLPolicy, "cover_url", strings.TrimSpace(*req.CoverURL))
		if err != nil {
			return err
		}
		spec.CoverURL = u
	}
	if req.Duration != nil {
		if err := durationError(int32(*req.Duration)); err != nil {
			return err
		}
		spec.Duration = req.Duration.int32s()
	}
	return nil
}
