package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"

	. "github.com/onsi/gomega"

	"github.com/videogen-dev/videogen-operator/internal/stacktest"
)

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json() map[string]any {
	var m map[string]any
	ExpectWithOffset(1, json.Unmarshal(r.body, &m)).To(Succeed(), "%s", r.body)
	return m
}

func (r reply) code() string {
	e, _ := r.json()["error"].(map[string]any)
	ExpectWithOffset(1, e).NotTo(BeNil(), "%s", r.body)
	return e["code"].(string)
}

// call sends a request to the REST API with key; body may be nil, a string or a JSON value.
func call(method, path, key string, body any, headers ...string) reply {
	return callAt(sys.apiURL, method, path, key, body, headers...)
}

// callAt is call against the REST API at base.
func callAt(base, method, path, key string, body any, headers ...string) reply {
	r, err := stacktest.Call(ctx, http.DefaultClient, base, method, path, key, body, headers...)
	Expect(err).NotTo(HaveOccurred())
	return reply{status: r.Status, header: r.Header, body: r.Body}
}

func balance(key string) map[string]any {
	r := call("GET", "/v1/balance", key, nil)
	Expect(r.status).To(Equal(http.StatusOK), "%s", r.body)
	return r.json()
}

func points(key, field string) int64 { return int64(balance(key)[field].(float64)) }

// waitTerminal polls a task until it reaches a terminal status with its charge decided
// (written with the terminal status; the account follows within a moment) and returns it.
func waitTerminal(key, id string) map[string]any {
	var task map[string]any
	Eventually(func() string {
		task = call("GET", "/v1/tasks/"+id, key, nil).json()
		s, _ := task["status"].(string)
		if (s == "succeeded" || s == "failed" || s == "canceled") && task["charge"] != "Frozen" {
			return "done"
		}
		return s
	}).Should(Equal("done"))
	return task
}

// download fetches a result URL. In kind mode result URLs name the worker's in-cluster
// Service; E2E_WORKER_PUBLIC_URL (that prefix) is swapped for E2E_WORKER_URL (a port-forward).
func download(url string) []byte {
	if public, local := os.Getenv("E2E_WORKER_PUBLIC_URL"), os.Getenv("E2E_WORKER_URL"); public != "" && local != "" {
		url = strings.Replace(url, public, local, 1)
	}
	resp, err := http.Get(url)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return b
}
