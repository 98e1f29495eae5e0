package apiserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// A key's namespace deleted while the apiserver's cache still has it (the key still passes):
// the signing secret's live read finds no namespace. GET /v1/webhook-secret answers 404
// account_not_found and the rotation 403, not a 500, and no signing Secret is made for the
// name, for a namespace made later to find.
func TestTheWebhookSecretOfANamespaceDeletedUnderTheCacheIsAccountNotFound(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acct", UID: "uid-acct"}}
	cached := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ns).Build()
	live := fake.NewClientBuilder().WithScheme(scheme.New()).Build() // the namespace is gone
	key, _, err := apikeys.Issue(context.Background(), cached, "videogen-system", "acct", "test")
	if err != nil {
		t.Fatal(err)
	}
	srv := apiserver.New(apiserver.Config{Client: cached, APIReader: live,
		Keys:           &apikeys.Authenticator{Reader: cached, Namespace: "videogen-system"},
		WebhookSecrets: &webhooksecrets.Store{Client: live, Reader: live, Namespace: "videogen-system"},
		Logger:         slog.New(slog.DiscardHandler)})
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/webhook-secret", http.StatusNotFound},
		{http.MethodPost, "/v1/webhook-secret/rotate", http.StatusForbidden},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.want || body.Error.Code != "account_not_found" {
			t.Errorf("%s %s: %d %s, want %d account_not_found", c.method, c.path, rec.Code, rec.Body, c.want)
		}
	}
	err = live.Get(context.Background(), client.ObjectKey{Namespace: "videogen-system", Name: webhooksecrets.SecretName("acct")}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a signing Secret was made for a namespace that does not exist: %v", err)
	}
}
