package webhookingress_test

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Acknowledgement latency against a real kube-apiserver", func() {
	It("reports the time to a 2xx for 100 sequential new events", func() {
		in := startIngress(newNamespace("latency"), configured)
		var took []time.Duration
		for i := range 100 {
			start := time.Now()
			a := in.postStripe(stripeEvent(fmt.Sprintf("evt_latency_%d", i)), stripeSecret)
			took = append(took, time.Since(start))
			Expect(a.status).To(Equal(http.StatusOK))
		}
		slices.Sort(took)
		AddReportEntry("ingress latency (envtest, loopback HTTP, one create each)",
			fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", took[49], took[89], took[98], took[99]))
	})
})
