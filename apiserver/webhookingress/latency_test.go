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
	It("acknowledges 90 of 100 sequential new events within 500 ms", func() {
		in := startIngress(newNamespace("latency"), configured)
		var took []time.Duration
		for i := range 100 {
			start := time.Now()
			a := in.postStripe(stripeEvent(fmt.Sprintf("evt_latency_%d", i)), stripeSecret)
			took = append(took, time.Since(start))
			Expect(a.status).To(Equal(http.StatusOK))
		}
		slices.Sort(took)
		p90 := took[89]
		AddReportEntry("ingress latency (envtest, loopback HTTP, one create each)",
			fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", took[49], p90, took[98], took[99]))
		// Lenient: one create takes a few ms, but the machine running the tests is shared.
		Expect(p90).To(BeNumerically("<", 500*time.Millisecond), "p90 acknowledgement latency")
	})
})
