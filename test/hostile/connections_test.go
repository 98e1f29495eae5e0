package hostile

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/videogen-dev/videogen-operator/internal/localstack"
)

// hostPort is the host:port of a base URL.
func hostPort(base string) string {
	GinkgoHelper()
	u, err := url.Parse(base)
	Expect(err).NotTo(HaveOccurred())
	return u.Host
}

// trickle sends head, then one byte of filler every 200 ms, until the server ends the
// connection; it returns how long that took and the answer, if the server gave one.
func trickle(addr, head string) (time.Duration, *http.Response) {
	GinkgoHelper()
	c, err := net.Dial("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	start := time.Now()
	_, err = io.WriteString(c, head)
	Expect(err).NotTo(HaveOccurred())
	type answer struct{ resp *http.Response }
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			resp = nil
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		answered <- answer{resp}
	}()
	limit := deadlines.Read + 5*time.Second
	for {
		select {
		case a := <-answered:
			// The answer may come before the server closes; either way it ended the request.
			return time.Since(start), a.resp
		case <-time.After(200 * time.Millisecond):
			if time.Since(start) > limit {
				Fail("a client trickling bytes kept the connection of " + addr + " open for " + limit.String())
			}
			if _, err := c.Write([]byte("x")); err != nil {
				return time.Since(start), (<-answered).resp
			}
		}
	}
}

var _ = Describe("Slow clients", func() {
	It("are cut off at the read deadline on every listener, and change nothing", func() {
		api, worker := hostPort(stack.APIURL), hostPort(stack.WorkerURL)
		slowBody := func(path, auth string) string {
			return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth +
				"Content-Length: 100000\r\n\r\n{\"a\":\""
		}
		slowHeaders := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
		type slow struct {
			what, addr, head string
			within           time.Duration
			status           int // the answer when the server gives one (0: it only closes)
		}
		cases := []slow{
			// The payment webhook ingress needs no credentials: anyone can try this.
			{"the webhook ingress", api, slowBody("/v1/webhooks/stripe", ""), deadlines.Read, http.StatusRequestTimeout},
			{"a task submission", api, slowBody("/v1/videos/short", "Authorization: Bearer "+slowClient.key+"\r\n"), deadlines.Read, http.StatusRequestTimeout},
			{"the Event Service", api, slowBody("/videogen.events.v1.EventService/Handle", "Authorization: Bearer "+stack.EventServiceToken+"\r\n"), deadlines.Read, 0},
			{"the API's headers", api, slowHeaders, deadlines.ReadHeader, 0},
			{"the worker's protocol", worker, slowBody("/v1/stages", "Authorization: Bearer "+stack.WorkerToken+"\r\n"), deadlines.Read, 0},
			{"the worker's headers (and blob downloads)", worker, slowHeaders, deadlines.ReadHeader, 0},
		}
		fns := make([]func(), len(cases))
		for i, c := range cases {
			fns[i] = func() {
				took, resp := trickle(c.addr, c.head)
				Expect(took).To(BeNumerically("<", c.within+2*time.Second), "%s: cut off after %s", c.what, took)
				if c.status != 0 && resp != nil {
					Expect(resp.StatusCode).To(Equal(c.status), c.what)
					var e struct{ Error struct{ Code string } }
					Expect(json.NewDecoder(resp.Body).Decode(&e)).To(Succeed(), c.what)
					Expect(e.Error.Code).To(Equal("request_timeout"), c.what)
				}
			}
		}
		parallel(fns...)
	})
})

var _ = Describe("Oversized headers", func() {
	It("get a 431 in the error envelope, from the API and the worker", func() {
		for _, base := range []string{stack.APIURL, stack.WorkerURL} {
			c, err := net.Dial("tcp", hostPort(base))
			Expect(err).NotTo(HaveOccurred())
			go func() {
				_, _ = io.WriteString(c, "GET /v1/balance HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+refused.key+
					"\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\n\r\n")
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			Expect(err).NotTo(HaveOccurred())
			raw, _ := io.ReadAll(resp.Body)
			c.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusRequestHeaderFieldsTooLarge), base)
			var e struct {
				Error struct {
					Code      string `json:"code"`
					RequestID string `json:"request_id"`
				} `json:"error"`
			}
			Expect(json.Unmarshal(raw, &e)).To(Succeed(), "%s: %s", base, raw)
			Expect(e.Error.Code).To(Equal("request_header_fields_too_large"))
			Expect(e.Error.RequestID).To(Equal(resp.Header.Get("X-Request-Id")))
		}
	})
})

var _ = Describe("The worker", func() {
	It("refuses every protocol call without its token, and reads the scheme in any case", func() {
		stage := map[string]any{"key": "hostile/t/uid/analyze", "capability": "video.eraser", "stage": "analyze",
			"inputs": map[string]any{"source_video_url": missing(100)}}
		for _, auth := range []string{"", "Bearer wrong", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:"+stack.WorkerToken)),
			"Bearer" + stack.WorkerToken, stack.WorkerToken} {
			for _, c := range []struct {
				method, path string
				body         any
			}{
				{"POST", "/v1/stages", stage},
				{"POST", "/v1/stages/stg_x/cancel", nil},
				{"POST", "/v1/stages/cancel", map[string]any{"key": "hostile/t/uid/analyze"}},
				{"GET", "/v1/stages/stg_x", nil},
			} {
				r := callAt(stack.WorkerURL, c.method, c.path, "", c.body, "Authorization", auth)
				Expect(r.Status).To(Equal(http.StatusUnauthorized), "%s %s with %q: %s", c.method, c.path, auth, r.Body)
				Expect(r.json()["error"]).To(HaveKeyWithValue("code", "unauthorized"))
			}
		}
		// The token the manager sends works, in any case of the scheme.
		r := callAt(stack.WorkerURL, "GET", "/v1/stages/stg_x", "", nil, "Authorization", "bearer "+stack.WorkerToken)
		Expect(r.Status).To(Equal(http.StatusNotFound), "%s", r.Body)
	})
})

var _ = Describe("An Adyen item without a pspReference", func() {
	It("is one PaymentEvent however its unsigned fields change on resends", func() {
		key := strings.Repeat("ab", 32)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: localstack.SystemNamespace, Name: "adyen-hostile",
			Labels: map[string]string{"videogen.dev/webhook-connector": "adyen"}}, StringData: map[string]string{"secret": key}}
		Expect(stack.Client.Create(ctx, secret)).To(Succeed())

		raw, _ := hex.DecodeString(key)
		mac := hmac.New(sha256.New, raw)
		mac.Write([]byte(":" + ":" + "HostileMerchant" + ":" + "order-17" + ":" + "1500" + ":" + "EUR" + ":" + "AUTHORISATION" + ":" + "true"))
		signature := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		item := func(date, reason string) string {
			return `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"` + signature +
				`","note":"` + reason + `"},"amount":{"currency":"EUR","value":1500},"eventCode":"AUTHORISATION","eventDate":"` + date +
				`","merchantAccountCode":"HostileMerchant","merchantReference":"order-17","pspReference":"","reason":"` + reason +
				`","success":"true"}}]}`
		}
		var first map[string]any
		Eventually(func() int { // the apiserver learns the connector secret through its cache
			r := call("POST", "/v1/webhooks/adyen", "", item("2026-11-23T10:00:00+01:00", "first"))
			first = r.json()
			return r.Status
		}).Should(Equal(http.StatusOK))
		Expect(first).To(HaveKeyWithValue("duplicate", false))
		again := call("POST", "/v1/webhooks/adyen", "", item("2026-11-24T11:00:00+01:00", "changed in transit"))
		Expect(again.Status).To(Equal(http.StatusOK), "%s", again.Body)
		Expect(again.json()).To(And(HaveKeyWithValue("duplicate", true), HaveKeyWithValue("id", first["id"])))
	})
})
