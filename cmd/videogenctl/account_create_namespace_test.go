package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// account create refuses the operator's namespace when it is not --key-namespace. Input: the
// operator is installed in namespace videogen (helm install -n videogen, or kustomize with
// another namespace), and the administrator runs `videogenctl account create videogen` (a
// demo account named after the product, or a copy of the install's namespace) without
// --key-namespace, whose default is videogen-system. Before the fix only kube-* and
// --key-namespace were refused, so the account was created in the operator's namespace: its
// tenant's API key acts in the namespace that holds every API key's Secret and the payment
// connectors' signing secrets, and the account's users (and the RBAC made for them) reach
// them. Now a namespace with the operator's Deployment (app.kubernetes.io/name=
// videogen-operator, control-plane=controller-manager: the chart's and the kustomize
// install's labels; a cluster administrator may read it), a namespace labelled so (the
// kustomize install labels its own) or one with API key or payment connector Secrets (a
// platform administrator may list them in the operator's namespace) is refused as the operator's, saying to pass
// --key-namespace; nothing is created. A namespace of another app is no operator's, and a new
// one is created as before (pins). Not told: a helm install with no key issued and no
// connector Secret yet, to a platform administrator, whose roles do not read Deployments.
func TestAccountCreateRefusesTheOperatorsNamespaceWhereverItIs(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	for _, ns := range []string{"videogen", "payments", "shop", "acme"} {
		mustCreateNamespace(t, ctx, c, ns)
	}
	deployment := func(ns string, labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controller-manager", Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "videogen/operator:v1"}}}}}}
	}
	if err := c.Create(ctx, deployment("videogen", map[string]string{"app.kubernetes.io/name": "videogen-operator", "control-plane": "controller-manager"})); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, deployment("shop", map[string]string{"app.kubernetes.io/name": "shop", "control-plane": "controller-manager"})); err != nil {
		t.Fatal(err)
	}
	// payments: the operator's namespace of an install whose keys were issued with --key-namespace payments.
	if _, _, err := apikeys.Issue(ctx, c, "payments", "acme", "production"); err != nil {
		t.Fatal(err)
	}
	// hooks: a helm install's namespace with a payment connector's Secret and no key issued yet.
	mustCreateNamespace(t, ctx, c, "hooks")
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "hooks", Name: "stripe-webhook",
		Labels: map[string]string{connectorsecrets.LabelConnector: "stripe"}}, StringData: map[string]string{connectorsecrets.KeySecret: "whsec_x"}}); err != nil {
		t.Fatal(err)
	}
	// vg: a kustomize install's namespace, which it labels as the operator's.
	if err := c.Create(ctx, namespace(&metav1.ObjectMeta{Name: "vg", Labels: map[string]string{
		"app.kubernetes.io/name": "videogen-operator", "control-plane": "controller-manager"}})); err != nil {
		t.Fatal(err)
	}
	root := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	// The platform administrator's roles (config/rbac) may read Secrets in the operator's
	// namespace only, and Deployments nowhere: the Deployment is for a cluster administrator.
	bindAdminRoles(t, ctx, c, "platform-admin", "payments")
	admin := kubeconfigFor(t, env, envtest.User{Name: "platform-admin"})
	for _, tc := range []struct{ ns, kubeconfig string }{{"videogen", root}, {"payments", root}, {"vg", root}, {"hooks", root}, {"payments", admin}, {"vg", admin}} {
		var out bytes.Buffer
		err := run(ctx, []string{"account", "create", tc.ns, "--kubeconfig", tc.kubeconfig}, &out)
		if err == nil || !strings.Contains(err.Error(), "operator's namespace") || !strings.Contains(err.Error(), "--key-namespace") {
			t.Errorf("account create %s (the operator's namespace): %v\n%s; want refused", tc.ns, err, out.String())
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: videogenv1alpha1.PointAccountName}, &videogenv1alpha1.PointAccount{}); err == nil {
			t.Errorf("account create %s created a PointAccount in the operator's namespace", tc.ns)
		}
	}
	// Checked, holds: another app's namespace is an account's like any.
	var out bytes.Buffer
	for _, tc := range []struct{ ns, kubeconfig string }{{"shop", root}, {"newco", admin}} {
		if err := run(ctx, []string{"account", "create", tc.ns, "--kubeconfig", tc.kubeconfig}, &out); err != nil {
			t.Errorf("account create %s: %v", tc.ns, err)
		}
	}
}

// account create with a description the PointAccount refuses creates nothing. Input: `account
// create acme --description "$(cat contract-summary.txt)"`, a description longer than the 256
// characters the CRD takes. Before the fix the CLI created the namespace acme (labelled
// videogen.dev/account=true) and then failed on the PointAccount ("spec.description: Too long"),
// exit status 1: a namespace made by a command that was refused, left behind. Now the
// description is checked (256 characters, as the CRD counts them: not bytes) before anything is
// created. 256 characters of a script three bytes each is no more than 256 (a pin).
func TestAccountCreateWithATooLongDescriptionCreatesNothing(t *testing.T) {
	env, ctx, c := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	kubeconfig := kubeconfigFor(t, env, envtest.User{Name: "root", Groups: []string{"system:masters"}})
	var out bytes.Buffer
	err := run(ctx, []string{"account", "create", "acme", "--description", strings.Repeat("x", 257), "--kubeconfig", kubeconfig}, &out)
	if err == nil || !strings.Contains(err.Error(), "256") {
		t.Errorf("account create with a 257-character description: %v; want refused: at most 256 characters", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "acme"}, &corev1.Namespace{}); err == nil {
		t.Errorf("account create refused for its description created the namespace acme")
	}
	if err := run(ctx, []string{"account", "create", "globex", "--description", strings.Repeat("日", 256), "--kubeconfig", kubeconfig}, &out); err != nil {
		t.Errorf("account create with 256 characters of three bytes: %v", err)
	}
}
