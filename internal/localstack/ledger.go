package localstack

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The REST apiserver reaches the ledger in the manager as it does in a cluster: with a service
// account token, which the manager checks with a TokenReview and a SubjectAccessReview on
// /ledger/v1/* (config/rbac/ledger_client_role.yaml).
const (
	apiserverAccount = "videogen-apiserver"
	ledgerClientRole = "videogen-ledger-client"
)

// ledgerToken makes the apiserver's service account, allows it the ledger, and writes a token
// for it into the data dir; it returns the file's path.
func (s *Stack) ledgerToken(ctx context.Context) (string, error) {
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: apiserverAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ledgerClientRole},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/ledger/v1/*"}, Verbs: []string{"get", "post"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ledgerClientRole},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ledgerClientRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: SystemNamespace, Name: apiserverAccount}}},
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	// A week: a token is made at every start of the stack.
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7 * 24 * 3600)}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: apiserverAccount}}
	if err := s.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("requesting the apiserver's token: %w", err)
	}
	path := s.path("apiserver-ledger-token")
	return path, os.WriteFile(path, []byte(req.Status.Token), 0o600)
}
