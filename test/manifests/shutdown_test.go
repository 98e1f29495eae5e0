package manifests

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
)

// managerShutdown is how long the manager may take to stop before it releases its Lease:
// controller-runtime's default GracefulShutdownTimeout (cmd/manager sets none), 30s; the Lease
// is released after the runnables stopped (LeaderElectionReleaseOnCancel).
const managerShutdown = 30 * time.Second

// shutdownMargin is what a process needs beyond its bounded waits to exit: the release of the
// Lease (one Update), the manager's own teardown.
const shutdownMargin = 5 * time.Second

// The pod running the REST apiserver gives it time to drain and shut down gracefully, and its
// manager container time to release the leader Lease, before the kubelet's SIGKILL. Both
// containers get SIGTERM together; the apiserver serves on for --shutdown-delay (5s by
// default, /readyz failing) while endpoints and Ingress controllers stop routing to it, then
// lets requests in flight finish for up to 15s. With terminationGracePeriodSeconds 20 a slow
// upload or webhook still in flight at the end was cut by SIGKILL (the client sees a reset
// connection and retries a submission or a webhook it may already have had stored), and a
// manager whose runnables took their whole graceful 30s was killed before releasing the Lease:
// the next leader waited out the Lease, the ledger answering no one meanwhile.
func TestPodsGiveTheDrainAndTheLeaseTimeBeforeSIGKILL(t *testing.T) {
	sources := map[string][]*unstructured.Unstructured{"chart": renderChart(t, "videogen-system")}
	for _, dir := range kustomizations {
		sources[dir] = renderFrom(t, dir)
	}
	checked := 0
	for source, objs := range sources {
		for _, u := range objs {
			if u.GetKind() != "Deployment" {
				continue
			}
			d := as[appsv1.Deployment](t, u)
			pod := d.Spec.Template.Spec
			grace := 30 * time.Second // the API's default
			if pod.TerminationGracePeriodSeconds != nil {
				grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
			}
			for _, c := range pod.Containers {
				inv, ok := invocationOf(c)
				if !ok {
					continue
				}
				var need time.Duration
				switch inv.program {
				case "apiserver":
					delay := httpserver.DefaultShutdownDelay
					for _, a := range inv.args {
						if v, ok := strings.CutPrefix(a, "--shutdown-delay="); ok {
							var err error
							if delay, err = time.ParseDuration(v); err != nil {
								t.Fatalf("%s: Deployment %s: %s: %v", source, d.Name, a, err)
							}
						}
					}
					need = delay + httpserver.ShutdownTimeout + shutdownMargin
				case "manager":
					need = managerShutdown + shutdownMargin
				default:
					continue
				}
				checked++
				if grace < need {
					t.Errorf("%s: Deployment %s: terminationGracePeriodSeconds %v, but its %s container needs %v to stop",
						source, d.Name, grace, inv.program, need)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no manager or apiserver container found")
	}
}
