package apiserver

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// Bounds of the cluster calls whose answers decide a request's (a replay's read around the
// cache, a cancel's patch and its read-back). While etcd or the kube-apiserver hangs, such a
// call would wait for the kube-apiserver's own timeout (60 s) or a lost connection; bounded,
// the request is answered 503 within about the ledger's deadline (ledger.DefaultDeadline).
var (
	clusterReadTimeout  = 5 * time.Second
	clusterWriteTimeout = 10 * time.Second
)

// readStored reads key around the cache, as the kube-apiserver stores it, within
// clusterReadTimeout.
func (s *Server) readStored(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	rctx, cancel := context.WithTimeout(ctx, clusterReadTimeout)
	defer cancel()
	return s.cfg.APIReader.Get(rctx, key, obj)
}

// clusterUnavailable reports whether err says the kube-apiserver (or another store the
// service depends on) did not answer, not that the request was wrong or the server broken: a
// timeout (its own or one of these bounds), a 429, 500, 503 or 504 of the kube-apiserver, or
// no HTTP answer at all (a refused or lost connection).
func clusterUnavailable(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var transport *url.Error
	return errors.As(err, &transport)
}

// writeClusterUnavailable answers a request the cluster did not answer for: 503, to retry. A
// request that changes something may have taken effect (a write that timed out may still be
// stored): the retry of a create with the same Idempotency-Key, or of a cancel, finds it done.
func writeClusterUnavailable(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "5")
	msg := "the service's cluster did not answer in time; retry shortly"
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		msg += " (the request may have taken effect: retry a create with the same Idempotency-Key)"
	}
	httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable, msg)
}
