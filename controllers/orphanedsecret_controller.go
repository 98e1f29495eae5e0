package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

// OrphanedSecretReconciler deletes the Secrets an account leaves behind in the operator's
// namespace once its namespace is gone: its API keys (apikeys) and its webhook signing Secret
// (webhooksecrets). Neither works for anyone after that (accountns.MadeFor), but a key's hash
// and a live signing secret the old tenant holds would otherwise stay forever.
type OrphanedSecretReconciler struct {
	// Client deletes.
	Client client.Client
	// Secrets reads the account Secrets of Namespace; SetupWithManager sets it to a cache of
	// only those.
	Secrets client.Reader
	// APIReader reads namespaces around any cache: a deletion cannot be undone, so a cache that
	// has not seen a namespace yet must not have its keys deleted.
	APIReader client.Reader
	// Namespace is the operator's namespace, where the Secrets are.
	Namespace string
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// The Secrets of deleted accounts are deleted (watched here, a cache of them only):
// +kubebuilder:rbac:groups="",namespace=videogen-system,resources=secrets,verbs=list;watch;delete

// Reconcile deletes Secret req when it is an account's and its namespace is gone or is another
// of the name. A namespace being deleted still exists: its tasks' completion webhooks may still
// be signed while they finish.
func (r *OrphanedSecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sec := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, req.NamespacedName, sec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	what, account := accountSecret(sec)
	if what == "" || !sec.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ns := &corev1.Namespace{}
	why := ""
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: account}, ns); {
	case apierrors.IsNotFound(err):
		why = "its namespace is deleted"
	case err != nil:
		return ctrl.Result{}, err
	case !accountns.MadeFor(sec, ns):
		why = "its namespace was deleted and the one of that name now is another"
	default:
		return ctrl.Result{}, nil
	}
	// Only the copy judged: one Ensure replaced in place for the new namespace since, or any
	// other write, conflicts and is judged again.
	err := r.Client.Delete(ctx, sec, client.Preconditions{UID: &sec.UID, ResourceVersion: &sec.ResourceVersion})
	if err == nil {
		logf.FromContext(ctx).Info("deleted the Secret of a deleted account", "account", account, "secret", sec.Name, "what", what, "why", why)
	}
	return requeueOnConflict(ctx, "the delete of "+sec.Name, ctrl.Result{}, client.IgnoreNotFound(err))
}

// accountSecret says which account Secret sec is ("API key <id>", "webhook signing Secret"),
// and of which account; what is "" for any other Secret.
func accountSecret(sec *corev1.Secret) (what, account string) {
	account = sec.Labels[apikeys.LabelAccount]
	switch {
	case account == "":
		return "", ""
	case sec.Labels[apikeys.LabelAPIKey] == "true":
		return "API key " + sec.Labels[apikeys.LabelKeyID], account
	case sec.Labels[webhooksecrets.LabelSigning] == "true" && sec.Name == webhooksecrets.SecretName(account):
		return "webhook signing Secret", account
	}
	return "", ""
}

// SetupWithManager registers the controller. It watches, in a cache of its own, only the
// Secrets of Namespace labelled with an account (the manager has no access to Secrets
// elsewhere); its first list finds those orphaned while no manager ran. Namespace deletions
// (metadata only) requeue the Secrets of their name.
func (r *OrphanedSecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Both kinds carry the account label; the reconciler tells them from anything else.
	hasAccount, err := labels.NewRequirement(apikeys.LabelAccount, selection.Exists, nil)
	if err != nil {
		return err
	}
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{r.Namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*hasAccount)}},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(secrets); err != nil {
		return err
	}
	r.Secrets = secrets
	deleted := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("orphaned-secrets").
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.secretsOf), builder.OnlyMetadata, builder.WithPredicates(deleted)).
		Complete(r)
}

// secretsOf is the account Secrets of namespace ns's name.
func (r *OrphanedSecretReconciler) secretsOf(ctx context.Context, ns client.Object) []ctrl.Request {
	var list corev1.SecretList
	if err := r.Secrets.List(ctx, &list, client.InNamespace(r.Namespace), client.MatchingLabels{apikeys.LabelAccount: ns.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "listing the Secrets of a deleted namespace", "account", ns.GetName())
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
