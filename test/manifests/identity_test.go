package manifests

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// The manager and the apiserver sidecar share a pod but not an identity: each container
// mounts the token of its own service account, and the pod mounts none by default.
func TestEachContainerMountsItsOwnToken(t *testing.T) {
	objs := renderFrom(t, "config/default")
	pod, secrets, accounts := managerPod(t, objs)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the manager pod must set automountServiceAccountToken: false")
	}
	identity := map[string]string{} // container → service account whose token it mounts
	for _, ctr := range pod.Containers {
		vol := volumeAt(pod, ctr, tokenPath)
		switch {
		case vol == nil:
			t.Errorf("container %s mounts no token at %s", ctr.Name, tokenPath)
		case vol.Projected != nil:
			if !projectsToken(vol.Projected) {
				t.Errorf("container %s: projected volume %s has no serviceAccountToken, ca.crt and namespace", ctr.Name, vol.Name)
			}
			identity[ctr.Name] = pod.ServiceAccountName
		case vol.Secret != nil:
			s, ok := secrets[vol.Secret.SecretName]
			if !ok || s.Type != corev1.SecretTypeServiceAccountToken {
				t.Errorf("container %s: %s is not a service-account-token Secret of this render", ctr.Name, vol.Secret.SecretName)
				continue
			}
			identity[ctr.Name] = s.Annotations[corev1.ServiceAccountNameKey]
		}
	}
	for ctr, sa := range identity {
		if !accounts[sa] {
			t.Errorf("container %s uses service account %q, which the render does not create", ctr, sa)
		}
	}
	if identity["manager"] == "" || identity["apiserver"] == "" || identity["manager"] == identity["apiserver"] {
		t.Errorf("manager and apiserver must have service accounts of their own, got %v", identity)
	}
}

// The rendered RBAC, applied for real to a kube-apiserver, gives the apiserver account what
// the REST API needs and nothing of the manager's.
func TestApiserverAccountIsLeastPrivileged(t *testing.T) {
	objs := renderFrom(t, "config/default")
	pod, secrets, _ := managerPod(t, objs)
	apiserverSA := ""
	for _, ctr := range pod.Containers {
		if vol := volumeAt(pod, ctr, tokenPath); ctr.Name == "apiserver" && vol != nil && vol.Secret != nil {
			apiserverSA = secrets[vol.Secret.SecretName].Annotations[corev1.ServiceAccountNameKey]
		}
	}
	if apiserverSA == "" {
		t.Fatal("the apiserver container mounts no service account token Secret")
	}
	const ns = "videogen-system"

	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths = nil // authorization does not need the CRDs
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			if err := c.Create(ctx, u.DeepCopy()); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}

	type check struct {
		user, verb, group, resource, sub, namespace string
		allowed                                     bool
	}
	apiserver := "system:serviceaccount:" + ns + ":" + apiserverSA
	manager := "system:serviceaccount:" + ns + ":" + pod.ServiceAccountName
	for _, k := range []check{
		// What the REST API does.
		{apiserver, "patch", "videogen.dev", "videotasks", "", "acme", true},
		{apiserver, "delete", "videogen.dev", "shorttemplates", "", "acme", true},
		{apiserver, "get", "", "secrets", "", ns, true},
		{apiserver, "create", "videogen.dev", "paymentevents", "", ns, true},
		// Each API key is checked against the namespace it was issued for, through a watch.
		{apiserver, "list", "", "namespaces", "", "", true},
		{apiserver, "watch", "", "namespaces", "", "", true},
		{apiserver, "delete", "", "namespaces", "", "", false},
		// What only the manager may do: the ledger creates tasks, with their admission.
		{apiserver, "create", "videogen.dev", "videotasks", "", "acme", false},
		{apiserver, "update", "videogen.dev", "videotasks", "status", "acme", false},
		{apiserver, "delete", "videogen.dev", "videotasks", "", "acme", false},
		{apiserver, "update", "videogen.dev", "pointaccounts", "", "acme", false},
		// Balances are the ledger's, in the manager: the apiserver asks it over HTTP and writes
		// no PointAccount status, so a compromised apiserver cannot mint points.
		{apiserver, "update", "videogen.dev", "pointaccounts", "status", "acme", false},
		{apiserver, "patch", "videogen.dev", "pointaccounts", "status", "acme", false},
		{manager, "update", "videogen.dev", "pointaccounts", "status", "acme", true},
		{apiserver, "create", "videogen.dev", "pointtopups", "", "acme", false},
		{apiserver, "create", "batch", "jobs", "", "acme", false},
		{apiserver, "get", "", "secrets", "", "acme", false},
		{apiserver, "update", "coordination.k8s.io", "leases", "", ns, false},
		{manager, "update", "videogen.dev", "videotasks", "status", "acme", true},
		{manager, "create", "batch", "jobs", "", "acme", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   k.user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: k.namespace, Verb: k.verb, Group: k.group, Resource: k.resource, Subresource: k.sub,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != k.allowed {
			t.Errorf("%s %s %s/%s (%s) in %s: allowed=%v, want %v (%s)", k.user, k.verb, k.resource, k.sub, k.group,
				k.namespace, sar.Status.Allowed, k.allowed, sar.Status.Reason)
		}
	}
}

// managerPod returns the controller-manager Deployment's pod spec, the render's Secrets by
// name, and its ServiceAccounts.
func managerPod(t *testing.T, objs []*unstructured.Unstructured) (corev1.PodSpec, map[string]corev1.Secret, map[string]bool) {
	t.Helper()
	var pod *corev1.PodSpec
	secrets, accounts := map[string]corev1.Secret{}, map[string]bool{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			if d := as[appsv1.Deployment](t, u); d.Spec.Template.Labels["control-plane"] == "controller-manager" {
				pod = &d.Spec.Template.Spec
			}
		case "Secret":
			s := as[corev1.Secret](t, u)
			secrets[s.Name] = s
		case "ServiceAccount":
			accounts[u.GetName()] = true
		}
	}
	if pod == nil {
		t.Fatal("no controller-manager Deployment in the render")
	}
	return *pod, secrets, accounts
}

func volumeAt(pod corev1.PodSpec, ctr corev1.Container, path string) *corev1.Volume {
	for _, m := range ctr.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				return &pod.Volumes[i]
			}
		}
	}
	return nil
}

func projectsToken(p *corev1.ProjectedVolumeSource) bool {
	var token, ca, namespace bool
	for _, s := range p.Sources {
		switch {
		case s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == "token":
			token = true
		case s.ConfigMap != nil && s.ConfigMap.Name == "kube-root-ca.crt":
			ca = true
		case s.DownwardAPI != nil:
			namespace = true
		}
	}
	return token && ca && namespace
}
