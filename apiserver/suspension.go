package apiserver

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// refuseSuspended answers 403 account_suspended for a suspended account. Suspension stops new
// work: tasks (refused by the ledger) and the short templates new tasks would use. A suspended
// account still reads its data, cancels tasks, deletes templates and rotates its webhook
// secret, because its running tasks still settle and their deliveries are still signed.
// It reads around the cache: once an administrator's suspension has returned, no template
// write passes on a replica whose watch lags (template writes are rare; one GET is cheap).
func (s *Server) refuseSuspended(ctx context.Context, account string) error {
	acct := &videogenv1alpha1.PointAccount{}
	err := s.cfg.APIReader.Get(ctx, client.ObjectKey{Namespace: account, Name: videogenv1alpha1.PointAccountName}, acct)
	switch {
	case apierrors.IsNotFound(err):
		return nil // templates need no points account
	case err != nil:
		return err
	case acct.Spec.Suspended:
		return &requestError{status: http.StatusForbidden, code: httpjson.CodeAccountSuspended,
			message: "this account is suspended: templates cannot be created or changed; contact your administrator"}
	}
	return nil
}
