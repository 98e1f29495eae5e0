package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
	"github.com/videogen-dev/videogen-operator/internal/stacktest"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// target is the system under test, reached only from outside: its REST API, a kubeconfig
// (for kubectl-equivalent calls and the CLI), and the demo data it was seeded with.
//
// E2E_MODE=local (the default) starts the local stack as real processes. E2E_MODE=kind uses a
// cluster that hack/kind-e2e.sh deployed, described by:
//
//	E2E_API_URL, E2E_API_KEY, E2E_KUBECONFIG, E2E_SHORT_TEMPLATE, E2E_TEMPLATE_TEMPLATE,
//	E2E_POSE_TEMPLATE, E2E_FACE_URL, E2E_VIDEO_URL, E2E_SYSTEM_NAMESPACE, and optionally
//	E2E_EVENT_SERVICE_TOKEN (the EventService.Handle spec is skipped without it)
type target struct {
	mode       string
	apiURL     string
	apiKey     string
	kubeconfig string
	demo       localstack.Demo
	systemNS   string
	account    string
	k8s        client.Client
	binDir     string
	// local says whether this machine's loopback is reachable from the system (receivers).
	local bool
	// hostAddress is where the system reaches servers on this machine: 127.0.0.1 locally, the
	// kind network's gateway (E2E_HOST_ADDRESS) on kind; empty: specs with receivers skip.
	hostAddress string
	// eventToken is a service token of EventService.Handle (E2E_EVENT_SERVICE_TOKEN on kind,
	// optional there).
	eventToken string
	// jobBackend names the backend that runs video.eraser as Kubernetes Jobs (E2E_JOB_BACKEND
	// on kind, where pods run); empty: the worker serves it over HTTP.
	jobBackend string
}

var sys *target

func startTarget(ctx context.Context) (*target, func()) {
	t := &target{mode: os.Getenv("E2E_MODE")}
	if t.mode == "" {
		t.mode = "local"
	}
	t.binDir = GinkgoT().TempDir()
	By("building the binaries")
	Expect(stacktest.Build(t.binDir, "manager", "apiserver", "worker", "videogenctl")).To(Succeed())
	stop := func() {}
	switch t.mode {
	case "local":
		By("starting the local stack")
		s, err := stacktest.Start(ctx, localstack.Config{
			DataDir: GinkgoT().TempDir(), BinDir: t.binDir, DemoPoints: 1000, Log: GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		stop = s.Stop
		t.apiURL, t.apiKey, t.kubeconfig, t.demo = s.APIURL, s.DemoKey, s.Kubeconfig, s.Demo
		t.eventToken = s.EventServiceToken
		t.systemNS, t.account, t.local = localstack.SystemNamespace, localstack.DemoAccount, true
		t.hostAddress = "127.0.0.1"
	case "kind":
		get := func(name string) string {
			v := os.Getenv(name)
			Expect(v).NotTo(BeEmpty(), "E2E_MODE=kind needs %s (hack/kind-e2e.sh sets it)", name)
			return v
		}
		t.apiURL, t.apiKey, t.kubeconfig = get("E2E_API_URL"), get("E2E_API_KEY"), get("E2E_KUBECONFIG")
		t.demo = localstack.Demo{ShortTemplate: get("E2E_SHORT_TEMPLATE"), TemplateTemplate: get("E2E_TEMPLATE_TEMPLATE"),
			PoseTemplate: get("E2E_POSE_TEMPLATE"), FaceURL: get("E2E_FACE_URL"), VideoURL: get("E2E_VIDEO_URL")}
		t.systemNS, t.account = get("E2E_SYSTEM_NAMESPACE"), "demo"
		t.eventToken = os.Getenv("E2E_EVENT_SERVICE_TOKEN")
		t.hostAddress = os.Getenv("E2E_HOST_ADDRESS")
		t.jobBackend = os.Getenv("E2E_JOB_BACKEND")
	default:
		Fail(fmt.Sprintf("E2E_MODE must be local or kind, not %q", t.mode))
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", t.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	t.k8s, err = client.New(restCfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	return t, stop
}

// receiver serves handler where the system can reach it (for completion webhooks and input
// URLs) and returns its base URL; specs skip when the system cannot reach this machine.
func receiver(handler http.Handler) string {
	if sys.hostAddress == "" {
		Skip("needs a server on this machine that the cluster can reach (set E2E_HOST_ADDRESS)")
	}
	srv := httptest.NewUnstartedServer(handler)
	if !sys.local {
		// Reachable from the kind nodes through the Docker network's gateway.
		l, err := net.Listen("tcp", "0.0.0.0:0")
		Expect(err).NotTo(HaveOccurred())
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	DeferCleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	Expect(err).NotTo(HaveOccurred())
	return "http://" + net.JoinHostPort(sys.hostAddress, port)
}

// cli runs the videogenctl binary against the target.
func cli(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(sys.binDir, "videogenctl"), append(args, "--kubeconfig", sys.kubeconfig, "--key-namespace", sys.systemNS)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// freeAddr is a loopback address for a process the suite starts.
func freeAddr() string {
	addr, err := testenv.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}
