package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// WebhookSecret is the account's signing secret for completion webhooks.
type WebhookSecret struct {
	Object            string     `json:"object"`
	Secret            string     `json:"secret"`
	PreviousSecret    *string    `json:"previous_secret"`
	PreviousExpiresAt *time.Time `json:"previous_expires_at"`
}

func viewWebhookSecret(s webhooksecrets.Secrets) WebhookSecret {
	v := WebhookSecret{Object: "webhook_secret", Secret: s.Current}
	if s.Previous != "" && s.PreviousExpiresAt != nil {
		v.PreviousSecret, v.PreviousExpiresAt = &s.Previous, s.PreviousExpiresAt
	}
	return v
}

// noNamespace answers a key whose account has no namespace (not made yet, or deleted): it has
// no signing secret, and none is made for a namespace of that name to find later.
const noNamespace = "this API key's account has no namespace; contact your administrator"

// getWebhookSecret returns the secret completion webhooks are signed with, making one if needed.
func (s *Server) getWebhookSecret(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	sec, err := s.cfg.WebhookSecrets.Ensure(r.Context(), p.Account)
	if errors.Is(err, webhooksecrets.ErrNoAccount) {
		// 404 for the GET of what is not there, 403 on the rotation: as account_not_found
		// for a missing points account.
		httpjson.WriteError(w, r, http.StatusNotFound, "account_not_found", noNamespace)
		return
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewWebhookSecret(sec))
}

// rotateWebhookSecret makes a new secret; the old one keeps signing (alongside) for the overlap.
func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	if writeRequestError(w, r, noBody(w, r)) {
		return
	}
	sec, err := s.cfg.WebhookSecrets.Rotate(r.Context(), p.Account, s.cfg.WebhookSecretOverlap)
	if errors.Is(err, webhooksecrets.ErrNoAccount) {
		httpjson.WriteError(w, r, http.StatusForbidden, "account_not_found", noNamespace)
		return
	}
	if errors.Is(err, webhooksecrets.ErrConcurrentRotation) {
		httpjson.WriteError(w, r, http.StatusConflict, httpjson.CodeConflict,
			"another rotation of this account's webhook secret won the race; GET /v1/webhook-secret shows the secret in force")
		return
	}
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewWebhookSecret(sec))
}
