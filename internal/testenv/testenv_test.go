package testenv

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
)

func TestAssetsDirHonoursKUBEBUILDER_ASSETS(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "/opt/envtest")
	if dir, err := AssetsDir(); err != nil || dir != "/opt/envtest" {
		t.Fatalf("AssetsDir = %q, %v", dir, err)
	}
}

// From an editor, tests run in their package's directory without KUBEBUILDER_ASSETS: the
// binaries are found under the module root, or the error says how to build them.
func TestAssetsDirFindsTheModulesBinaries(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	root := t.TempDir()
	pkg := filepath.Join(root, "some", "package")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)
	if _, err := AssetsDir(); err == nil || !strings.Contains(err.Error(), "make setup-envtest") {
		t.Fatalf("without binaries AssetsDir says %v, want a hint to build them", err)
	}
	want := filepath.Join(root, "bin", "k8s", KubernetesVersion)
	if err := os.MkdirAll(want, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(want, "kube-apiserver"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if dir, err := AssetsDir(); err != nil || dir != want {
		t.Fatalf("AssetsDir = %q, %v; want %s", dir, err, want)
	}
}

// The version is written in three places: they must agree, or make test builds one control
// plane and the tests look for another.
func TestKubernetesVersionAgreesWithTheScripts(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for file, pattern := range map[string]string{
		"Makefile":              `(?m)^K8S_VERSION \?= (\S+)$`,
		"hack/setup-envtest.sh": `K8S_VERSION=\$\{K8S_VERSION:-([^}]+)\}`,
	} {
		raw, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pattern).FindStringSubmatch(string(raw))
		if m == nil || m[1] != KubernetesVersion {
			t.Errorf("%s sets the Kubernetes version to %v, testenv.KubernetesVersion is %s", file, m, KubernetesVersion)
		}
	}
}

// A port for a child process comes from below the ephemeral range, where nothing that asks the
// kernel for any port can be handed it in the meantime, and is free.
func TestFreeAddrIsBelowTheEphemeralRangeAndFree(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, portText, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			t.Fatal(err)
		}
		if port >= ephemeralLow() || port < 1024 {
			t.Errorf("FreeAddr = %s, want a port in [1024, %d)", addr, ephemeralLow())
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr gave %s, which cannot be bound: %v", addr, err)
		}
		l.Close()
		seen[addr] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 calls gave only %d addresses: parallel callers would collide", len(seen))
	}
}

// hack/setup-envtest.sh stamps the release version into the kube-apiserver it builds: unstamped,
// it reports v0.0.0-master+$Format:%H$ and `kubectl version` against `make run` exits 1.
func TestControlPlaneReportsItsReleaseVersion(t *testing.T) {
	env, cfg, _, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != "v"+KubernetesVersion {
		t.Errorf("the kube-apiserver reports %q, want v%s: rebuild it with hack/setup-envtest.sh", info.GitVersion, KubernetesVersion)
	}
	if _, err := version.ParseSemantic(info.GitVersion); err != nil {
		t.Errorf("kubectl cannot parse the kube-apiserver's version: %v", err)
	}
}

// The local stack and the tests name the policies as make deploy does (config/default's
// namePrefix), so that a refusal there reads as docs/ledger.md quotes it.
func TestPoliciesAreNamedAsMakeDeployNamesThem(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^namePrefix:\s*(\S+)\s*$`).FindSubmatch(raw)
	if m == nil || string(m[1]) != policyNamePrefix {
		t.Fatalf("config/default/kustomization.yaml namePrefix %q; InstallPolicies prefixes %q", m, policyNamePrefix)
	}
}
