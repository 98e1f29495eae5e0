package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/videogen-dev/videogen-operator/internal/stacktest"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// `make run` is bin/videogen-local: this drives that binary as a newcomer does, twice on the
// same data directory, stopping it with Ctrl-C (SIGINT) each time.
var _ = Describe("make run (bin/videogen-local)", Ordered, func() {
	var (
		bin, dataDir, apiAddr, workerAddr string
		firstKey, taskID                  string
	)
	BeforeAll(func() {
		if sys.mode != "local" {
			Skip("drives the local stack binary; nothing to do against a kind cluster")
		}
		Expect(stacktest.Build(sys.binDir, "videogen-local")).To(Succeed())
		bin = filepath.Join(sys.binDir, "videogen-local")
		dataDir, apiAddr, workerAddr = GinkgoT().TempDir(), freeAddr(), freeAddr()
	})

	It("refuses a flag the manager does not take before it starts anything", func() {
		refusedDir := GinkgoT().TempDir()
		cmd := exec.Command(bin, "--data-dir", refusedDir, "--bin-dir", sys.binDir, "--api-address", freeAddr(),
			"--worker-address", freeAddr(), "--manager-arg=--payment-event-sink=sinks.yaml")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session, time.Minute).Should(gexec.Exit(1))
		Expect(string(session.Err.Contents())).To(ContainSubstring(
			"manager refuses the flags --payment-event-sink=sinks.yaml: flag provided but not defined: -payment-event-sink"))
		Expect(filepath.Join(refusedDir, "etcd")).NotTo(BeADirectory(), "no control plane was started")
	})

	It("run outside the repository, says where to run it instead of naming a missing binary", func() {
		cmd := exec.Command(bin, "--data-dir", GinkgoT().TempDir(), "--api-address", freeAddr(), "--worker-address", freeAddr())
		cmd.Dir = os.TempDir()
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session, time.Minute).Should(gexec.Exit(1))
		Expect(string(session.Err.Contents())).To(ContainSubstring("run it inside the videogen-operator repository (make run)"))
	})

	It("starts, seeds, prints a working key, and stops cleanly on Ctrl-C", func() {
		// A PaymentEvent sink given to the manager with --manager-arg, as a user tries sinks.
		sink := make(chan []byte, 10)
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			select {
			case sink <- body:
			default:
			}
		}))
		DeferCleanup(receiver.Close)
		sinks := filepath.Join(GinkgoT().TempDir(), "sinks.yaml")
		Expect(os.WriteFile(sinks, []byte("sinks:\n- name: local\n  url: "+receiver.URL+"\n  secret: "+standardwebhooks.NewSecret()+"\n"),
			0o600)).To(Succeed())
		run := startLocal(bin, dataDir, apiAddr, workerAddr, "--manager-arg=--payment-event-sinks="+sinks)
		firstKey = run.key
		Expect(run.banner).To(ContainSubstring("http://" + apiAddr))
		Expect(run.banner).To(ContainSubstring("export KUBECONFIG=" + filepath.Join(dataDir, "kubeconfig")))
		Expect(run.banner).To(MatchRegexp(`curl -s .* '%s/v1/templates\?capability=video\.short'`, regexp.QuoteMeta("http://"+apiAddr)))

		b := callAt("http://"+apiAddr, "GET", "/v1/balance", run.key, nil)
		Expect(b.status).To(Equal(http.StatusOK), "%s", b.body)
		Expect(b.json()["credited"]).To(BeEquivalentTo(1000), "the welcome top-up")

		// The stripe connector has the secret the banner names: a delivery signed with it, as
		// the README does, is verified.
		secretFile := filepath.Join(dataDir, "stripe-webhook-secret")
		Expect(run.banner).To(ContainSubstring(secretFile))
		whsec, err := os.ReadFile(secretFile)
		Expect(err).NotTo(HaveOccurred())
		payload := `{"id":"evt_makerun_1","object":"event","type":"payment_intent.succeeded","created":1763700000,` +
			`"data":{"object":{"id":"pi_makerun_1","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, bytes.TrimSpace(whsec))
		mac.Write([]byte(ts + "." + payload))
		delivery := callAt("http://"+apiAddr, "POST", "/v1/webhooks/stripe", "", payload,
			"Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
		Expect(delivery.status).To(Equal(http.StatusOK), "%s", delivery.body)
		var forwarded []byte
		Eventually(sink).Should(Receive(&forwarded), "the manager forwards the PaymentEvent to the sink")
		Expect(string(forwarded)).To(ContainSubstring(`"pi_makerun_1"`))
		task := callAt("http://"+apiAddr, "POST", "/v1/videos/eraser", run.key, map[string]string{"video": run.videoURL},
			"Idempotency-Key", "before-restart")
		Expect(task.status).To(Equal(http.StatusAccepted), "%s", task.body)
		taskID = task.json()["id"].(string)

		run.interrupt()
		l, err := net.Listen("tcp", apiAddr)
		Expect(err).NotTo(HaveOccurred(), "the API port is free again")
		Expect(l.Close()).To(Succeed())
	})

	It("keeps the data and the key on a second run", func() {
		Expect(firstKey).NotTo(BeEmpty(), "the first run must have succeeded")
		managerMetrics, apiMetrics := freeAddr(), freeAddr()
		run := startLocal(bin, dataDir, apiAddr, workerAddr,
			"--manager-metrics-address", managerMetrics, "--api-metrics-address", apiMetrics)
		Expect(run.key).To(Equal(firstKey))

		task := callAt("http://"+apiAddr, "GET", "/v1/tasks/"+taskID, run.key, nil)
		Expect(task.status).To(Equal(http.StatusOK), "the task of the first run is still there: %s", task.body)
		Eventually(func() any {
			return callAt("http://"+apiAddr, "GET", "/v1/tasks/"+taskID, run.key, nil).json()["status"]
		}).Should(BeElementOf("succeeded", "failed"))
		b := callAt("http://"+apiAddr, "GET", "/v1/balance", run.key, nil).json()
		Expect(b["credited"]).To(BeEquivalentTo(1000), "seeding again credits nothing: %v", b)
		Expect(b["balance"].(float64) + b["frozen"].(float64) + b["spent"].(float64)).To(BeEquivalentTo(1000))
		replay := callAt("http://"+apiAddr, "POST", "/v1/videos/eraser", run.key, map[string]string{"video": run.videoURL},
			"Idempotency-Key", "before-restart")
		Expect(replay.json()["id"]).To(Equal(taskID), "the Idempotency-Key still names the same task")

		// Asked for, both serve their metrics: the demo account the manager reconciled, the calls
		// just made.
		Eventually(func() string { return scrape(managerMetrics) }).Should(
			MatchRegexp(`(?m)^videogen_account_points\{namespace="[^"]+",state="credited"\} 1000$`))
		Expect(scrape(apiMetrics)).To(MatchRegexp(`(?m)^videogen_api_requests_total\{.*route="GET /v1/balance".*\} [1-9]`))

		run.interrupt()
	})
})

type localRun struct {
	cmd           *exec.Cmd
	session       *gexec.Session
	banner        string
	key, videoURL string
}

var (
	bannerKey   = regexp.MustCompile(`API key\s+(vg_\S+)`)
	bannerVideo = regexp.MustCompile(`-d '\{"video":"([^"]+)"\}'`)
)

// startLocal runs videogen-local, with more flags if given, and waits for its banner.
func startLocal(bin, dataDir, apiAddr, workerAddr string, flags ...string) *localRun {
	cmd := exec.Command(bin, append([]string{"--data-dir", dataDir, "--bin-dir", sys.binDir,
		"--api-address", apiAddr, "--worker-address", workerAddr}, flags...)...)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	r := &localRun{cmd: cmd, session: session}
	DeferCleanup(func() {
		// Only if a step failed before the interrupt: Ctrl-C first, so that videogen-local stops
		// its children (a SIGKILL would leave the control plane and the manager running).
		if session.ExitCode() == -1 {
			_ = cmd.Process.Signal(syscall.SIGINT)
			if !waitExit(session, time.Minute) {
				session.Kill()
			}
		}
	})
	Eventually(session.Out, 5*time.Minute).Should(gbytes.Say("Ctrl-C stops everything"))
	r.banner = string(session.Out.Contents())
	m := bannerKey.FindStringSubmatch(r.banner)
	Expect(m).To(HaveLen(2), "the banner shows the API key:\n%s", r.banner)
	r.key = m[1]
	v := bannerVideo.FindStringSubmatch(r.banner)
	Expect(v).To(HaveLen(2), "the banner shows an eraser example:\n%s", r.banner)
	r.videoURL = v[1]
	return r
}

// interrupt is Ctrl-C: everything stops within the grace periods and the exit status is 0.
func (r *localRun) interrupt() {
	Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	Eventually(r.session, time.Minute).Should(gexec.Exit(0))
}

// scrape is the Prometheus text served at addr's /metrics ("" while it does not answer).
func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// waitExit says whether session exited within d.
func waitExit(session *gexec.Session, d time.Duration) bool {
	select {
	case <-session.Exited:
		return true
	case <-time.After(d):
		return false
	}
}
