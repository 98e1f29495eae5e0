package apiserver_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A request's method cannot add series to the request metrics. Input: anyone who can reach
// the REST port, without an API key, sends requests whose method is a fresh token each time
// (`curl -X A1 …`, `-X A2 …`: any RFC 9110 token is a method to Go's server, up to the 1 MiB
// header limit). Each answer is a 405 or 404 envelope, as it should be, but before the fix the
// method went verbatim into the method label of videogen_api_requests_total and
// videogen_api_request_duration_seconds (14 series with its buckets): every new method made
// new series that live for the process's life. A loop of requests grows the apiserver's memory
// without bound (long methods make each series large) and every Prometheus scrape with it,
// until the sidecar is OOM-killed, taking the REST API down for all accounts, and the
// Prometheus target blows its sample limit. The metric is bounded as promhttp bounds it: the
// methods the API serves keep their names, any other is counted as "other".
func TestUnknownMethodsAddNoMetricSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newLedgerFacing(t, electingLedger{}, reg)
	for i := range 50 {
		for _, path := range []string{"/v1/tasks", "/v1/nowhere"} {
			method := fmt.Sprintf("M%d%s", i, strings.Repeat("X", 200))
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code < 400 || rec.Code >= 500 {
				t.Fatalf("%s %s: %d, want a 4xx", method[:4], path, rec.Code)
			}
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "videogen_api_requests_total" {
			continue
		}
		methods := map[string]bool{}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" {
					methods[l.GetValue()] = true
				}
			}
		}
		if len(methods) > 2 {
			t.Errorf("after 100 requests with 50 made-up methods, videogen_api_requests_total has %d method values (%d series), want them counted under one", len(methods), len(fam.GetMetric()))
		}
		if !methods["other"] {
			t.Errorf("no method=\"other\" series")
		}
		return
	}
	t.Fatal("videogen_api_requests_total not exported")
}
