// Package testenv starts a real kube-apiserver and etcd (envtest) with this project's CRDs, from
// the binaries that hack/setup-envtest.sh builds, so tests run the same from make and an editor.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// KubernetesVersion is the control-plane version hack/setup-envtest.sh builds by default.
const KubernetesVersion = "1.37.1"

// ModuleRoot returns the directory holding go.mod, searching up from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// AssetsDir returns KUBEBUILDER_ASSETS if set, else bin/k8s/<version> under the module root.
func AssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", KubernetesVersion)
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("no envtest binaries in %s: run make setup-envtest first (hack/setup-envtest.sh; it builds them from Go modules, about six minutes the first time), or set KUBEBUILDER_ASSETS", dir)
	}
	return dir, nil
}

// Scheme returns a scheme with the built-in types and videogen.dev/v1alpha1.
func Scheme() *runtime.Scheme { return scheme.New() }

// New returns an envtest.Environment with the project's CRDs installed and assets located.
func New() (*envtest.Environment, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                Scheme(),
	}, nil
}

// Start starts a control plane with the project's CRDs and admission policies and returns it
// with its config and a direct client. Client-side rate limiting is off: tests measure the apiserver, not the client.
func Start() (*envtest.Environment, *rest.Config, client.Client, error) {
	env, err := New()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err == nil {
		err = InstallPolicies(context.Background(), c)
	}
	if err != nil {
		_ = env.Stop()
		return nil, nil, nil, err
	}
	return env, cfg, c, nil
}

// policyNamePrefix is config/default's namePrefix, which make deploy puts on the policies.
const policyNamePrefix = "videogen-"

// InstallPolicies creates the ValidatingAdmissionPolicies of config/policies (and their
// bindings), as `make deploy` does, so that tests and the local stack meet them too.
func InstallPolicies(ctx context.Context, c client.Client) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "policies", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" || base == "kustomizeconfig.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", base, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			// Named as make deploy names them, so that the refusals read as the docs quote them.
			obj.SetName(policyNamePrefix + obj.GetName())
			if name, found, _ := unstructured.NestedString(obj.Object, "spec", "policyName"); found {
				if err := unstructured.SetNestedField(obj.Object, policyNamePrefix+name, "spec", "policyName"); err != nil {
					return err
				}
			}
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: creating %s %s: %w", base, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
