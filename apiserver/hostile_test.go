package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// templates are the official templates a hostile request names.
type templates struct{ short, adjustable, fixedVideo string }

// hostile is one request an attacker or a broken client might send.
type hostile struct {
	method, path string
	body         func(templates) any
	headers      []string
}

func shortWith(face string) func(templates) any {
	return func(t templates) any { return map[string]any{"template_id": t.short, "face": face} }
}

func eraserWith(video string) func(templates) any {
	return func(templates) any { return map[string]any{"video": video} }
}

func webhookWith(url string) func(templates) any {
	return func(t templates) any {
		return map[string]any{"template_id": t.adjustable, "duration": 2, "webhook_url": url}
	}
}

func durationOf(raw string) func(templates) any {
	return func(t templates) any { return `{"template_id":"` + t.adjustable + `","duration":` + raw + `}` }
}

func raw(body string) func(templates) any { return func(templates) any { return body } }

// longURL is a public https URL of exactly n characters.
func longURL(n int) string {
	const prefix = "https://cdn.example.com/"
	return prefix + strings.Repeat("a", n-len(prefix))
}

// longTemplateID is a valid object name of 253 characters starting with prefix.
func longTemplateID(prefix string) string {
	label := func(c string, n int) string { return strings.Repeat(c, n) }
	id := prefix + label("a", 63-len(prefix)) + "." + label("b", 63) + "." + label("c", 63) + "." + label("d", 61)
	Expect(id).To(HaveLen(253))
	return id
}

// truncated shows at most 1 KiB of a body in a failure message.
func truncated(b []byte) string {
	if len(b) > 1024 {
		return string(b[:1024]) + "…"
	}
	return string(b)
}

// pngBomb is a PNG whose header (with a valid CRC) claims side×side pixels: only the header's
// dimensions, checked before any decoding, stop it.
func pngBomb(side uint32) string {
	var buf bytes.Buffer
	Expect(png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1)))).To(Succeed())
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[16:20], side)
	binary.BigEndian.PutUint32(b[20:24], side)
	binary.BigEndian.PutUint32(b[29:33], crc32.ChecksumIEEE(b[12:29])) // IHDR type and data
	return base64.StdEncoding.EncodeToString(b)
}

var _ = Describe("Hostile input", func() {
	var (
		a, bystander account
		tmpl         templates
	)
	BeforeEach(func() {
		a, bystander = newAccount(100), newAccount(100)
		tmpl = templates{
			short: template(videogenv1alpha1.CapabilityShort, ptr.To[int64](10), nil),
			adjustable: template(videogenv1alpha1.CapabilityTemplate, nil, func(s *videogenv1alpha1.TemplateSpec) {
				s.DurationAdjustable, s.MinDuration, s.MaxDuration = true, ptr.To[int32](2), ptr.To[int32](10)
				s.DurationPrices = map[string]int64{"2": 5, "10": 9}
			}),
			fixedVideo: template(videogenv1alpha1.CapabilityTemplate, ptr.To[int64](10), nil),
		}
	})

	expectNothingChanged := func() {
		GinkgoHelper()
		Expect(tasksIn(a.ns)).To(BeEmpty())
		var own videogenv1alpha1.ShortTemplateList
		Expect(k8sClient.List(ctx, &own, client.InNamespace(a.ns))).To(Succeed())
		Expect(own.Items).To(BeEmpty())
		suite.ExpectBalanced(a.ns, 100, 0, 0)
		suite.ExpectBalanced(bystander.ns, 100, 0, 0)
	}

	DescribeTable("refuses it with the right 4xx and moves no points",
		func(h hostile, status int, code, message string) {
			c := call{method: h.method, path: h.path, key: a.key, headers: map[string]string{}}
			if h.body != nil {
				c.body = h.body(tmpl)
			}
			for i := 0; i+1 < len(h.headers); i += 2 {
				c.headers[h.headers[i]] = h.headers[i+1]
			}
			resp := api.do(c)
			Expect(resp.Status).To(Equal(status), truncated(resp.Body))
			Expect(resp.ErrorCode()).To(Equal(code))
			Expect(resp.Message()).To(ContainSubstring(message))
			// Whatever was sent, the answer does not echo it back in full.
			Expect(len(resp.Body)).To(BeNumerically("<", 2048), truncated(resp.Body))
			expectNothingChanged()
		},
		// SSRF: what errors_test.go does not already try.
		Entry("localhost by name", hostile{"POST", "/v1/videos/short", shortWith("http://localhost:8080/f.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("a private face address with a trailing dot", hostile{"POST", "/v1/videos/short", shortWith("http://192.168.1.1./x"), nil}, 400, "invalid_request", `"face"`),
		Entry("LOCALHOST. (upper case, trailing dot)", hostile{"POST", "/v1/videos/short", shortWith("http://LOCALHOST./f.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("a name under .localhost", hostile{"POST", "/v1/images/pose", func(t templates) any {
			return map[string]any{"template_id": t.short, "face": "http://api.localhost/f.jpg"}
		}, nil}, 400, "invalid_request", `"face"`),
		Entry("IPv6 loopback", hostile{"POST", "/v1/videos/short", shortWith("http://[::1]:80/f.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("IPv4-mapped loopback in hex", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[::ffff:7f00:1]/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("IPv4-mapped metadata address", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[::ffff:169.254.169.254]/latest"), nil}, 400, "invalid_request", `"video"`),
		Entry("the unspecified address", hostile{"POST", "/v1/videos/eraser", eraserWith("http://0.0.0.0:8080/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("a private address", hostile{"POST", "/v1/videos/eraser", eraserWith("http://10.0.0.5/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("carrier-grade NAT", hostile{"POST", "/v1/videos/eraser", eraserWith("http://100.64.0.1/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("IPv6 link-local with a zone", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[fe80::1%25eth0]/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("NAT64 of the metadata address", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[64:ff9b::a9fe:a9fe]/latest"), nil}, 400, "invalid_request", `"video"`),
		Entry("6to4 of a private address", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[2002:c0a8:101::1]/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("metadata webhook", hostile{"POST", "/v1/videos/template", webhookWith("http://169.254.169.254/latest/meta-data/"), nil}, 400, "invalid_request", `"webhook_url"`),
		// A zone hid these ranges from the nonPublic list (netguard's TestAZonedNonPublicAddressIsRefused).
		Entry("a zoned NAT64 metadata webhook", hostile{"POST", "/v1/videos/template", webhookWith("http://[64:ff9b::a9fe:a9fe%251]/latest/meta-data/"), nil}, 400, "invalid_request", `"webhook_url"`),
		Entry("a zoned 6to4 video", hostile{"POST", "/v1/videos/eraser", eraserWith("http://[2002:c0a8:101::1%25eth0]/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("IPv6 metadata webhook (ULA)", hostile{"POST", "/v1/videos/template", webhookWith("http://[fd00:ec2::254]/"), nil}, 400, "invalid_request", `"webhook_url"`),
		Entry("file webhook", hostile{"POST", "/v1/videos/template", webhookWith("file:///etc/passwd"), nil}, 400, "invalid_request", `"webhook_url"`),
		Entry("gopher face", hostile{"POST", "/v1/videos/short", shortWith("gopher://127.0.0.1:6379/_FLUSHALL"), nil}, 400, "invalid_request", `"face"`),
		Entry("credentials in a URL", hostile{"POST", "/v1/videos/short", shortWith("https://user:pw@cdn.example.com/f.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("a video that is not a URL", hostile{"POST", "/v1/videos/eraser", eraserWith("javascript:alert(1)"), nil}, 400, "invalid_request", `"video"`),
		Entry("loopback short template target", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"t","target_url":"http://127.0.0.1:8080/t.mp4"}`), nil}, 400, "invalid_request", `"target_url"`),
		Entry("metadata short template cover", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"t","target_url":"https://cdn.example.com/t.mp4","cover_url":"http://169.254.169.254/c.jpg"}`), nil}, 400, "invalid_request", `"cover_url"`),

		// Durations: negative, zero, out of range, beyond int32, beyond float64, fractional.
		Entry("duration -1", hostile{"POST", "/v1/videos/template", durationOf("-1"), nil}, 400, "invalid_request", `"duration"`),
		Entry("duration 0", hostile{"POST", "/v1/videos/template", durationOf("0"), nil}, 400, "invalid_request", `"duration"`),
		Entry("duration above the template's range", hostile{"POST", "/v1/videos/template", durationOf("11"), nil}, 400, "invalid_request", `"duration"`),
		Entry("duration 2^31", hostile{"POST", "/v1/videos/template", durationOf("2147483648"), nil}, 400, "invalid_request", `"duration" is out of range`),
		Entry("duration -2^31-1", hostile{"POST", "/v1/videos/template", durationOf("-2147483649"), nil}, 400, "invalid_request", `"duration" is out of range`),
		Entry("duration 1e309", hostile{"POST", "/v1/videos/template", durationOf("1e309"), nil}, 400, "invalid_request", `"duration"`),
		Entry("duration 2.5", hostile{"POST", "/v1/videos/template", durationOf("2.5"), nil}, 400, "invalid_request", `"duration"`),
		Entry("duration null", hostile{"POST", "/v1/videos/template", durationOf("null"), nil}, 400, "invalid_request", `"duration" is required`),
		// A fixed-price template ignores duration in its price, but the range holds on every endpoint.
		Entry("duration -5 on a fixed short template", hostile{"POST", "/v1/videos/short", func(t templates) any {
			return map[string]any{"template_id": t.short, "face": "https://cdn.example.com/f.jpg", "duration": -5}
		}, nil}, 400, "invalid_request", `field "duration" must be from 1 to 3600 seconds, not -5`),
		Entry("duration 3601 on a fixed short template", hostile{"POST", "/v1/videos/short", func(t templates) any {
			return map[string]any{"template_id": t.short, "face": "https://cdn.example.com/f.jpg", "duration": 3601}
		}, nil}, 400, "invalid_request", `field "duration" must be from 1 to 3600 seconds, not 3601`),
		Entry("duration 0 on a fixed video template", hostile{"POST", "/v1/videos/template", func(t templates) any {
			return map[string]any{"template_id": t.fixedVideo, "duration": 0}
		}, nil}, 400, "invalid_request", `field "duration" must be from 1 to 3600 seconds, not 0`),
		Entry("duration -5 with an unknown template (checked before the template is looked up)", hostile{"POST", "/v1/videos/short", func(t templates) any {
			return map[string]any{"template_id": "no-such-template", "face": "https://cdn.example.com/f.jpg", "duration": -5}
		}, nil}, 400, "invalid_request", `"duration"`),
		Entry("short template duration 3601", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"t","target_url":"https://cdn.example.com/t.mp4","duration":3601}`), nil}, 400, "invalid_request", `"duration"`),
		Entry("short template duration 2^32+1", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"t","target_url":"https://cdn.example.com/t.mp4","duration":4294967297}`), nil}, 400, "invalid_request", `"duration"`),

		// Malformed and oversized bodies.
		Entry("a JSON null", hostile{"POST", "/v1/videos/short", raw(`null`), nil}, 400, "invalid_request", "must be a JSON object, not null"),
		Entry("nesting beyond the decoder's depth", hostile{"POST", "/v1/videos/short",
			raw(`{"template_id":` + strings.Repeat("[", 20000)), nil}, 400, "invalid_request", "JSON"),
		Entry("a NUL in the template id", hostile{"POST", "/v1/videos/short", func(templates) any {
			return map[string]any{"template_id": "x\x00y", "face": "https://cdn.example.com/f.jpg"}
		}, nil}, 400, "invalid_request", `"template_id"`),
		// Names the Kubernetes client refuses before any request ('/', "..") once escaped as
		// 500: they are now checked as object names first.
		Entry("a path in the template id", hostile{"POST", "/v1/videos/short", func(templates) any {
			return map[string]any{"template_id": "../../api/v1/namespaces/kube-system/secrets/x", "face": "https://cdn.example.com/f.jpg"}
		}, nil}, 400, "invalid_request", `"template_id"`),
		Entry("invalid UTF-8 in the template id", hostile{"POST", "/v1/videos/short",
			raw("{\"template_id\":\"\xff\xfe\",\"face\":\"https://cdn.example.com/f.jpg\"}"), nil}, 400, "invalid_request", `"template_id"`),
		// encoding/json reads each byte that is not UTF-8 as U+FFFD: a Latin-1 "café" was stored
		// as "caf\ufffd" with a 201, and a URL changed under the client's feet.
		Entry("a Latin-1 short template name", hostile{"POST", "/v1/short-templates",
			raw("{\"name\":\"caf\xe9\",\"target_url\":\"https://cdn.example.com/t.mp4\"}"), nil}, 400, "invalid_request", `field "name" is not valid UTF-8`),
		Entry("a stray 0xff in a webhook URL", hostile{"POST", "/v1/videos/template", func(t templates) any {
			return `{"template_id":"` + t.adjustable + `","duration":2,"webhook_url":"https://hooks.example.com/a` + "\xff" + `"}`
		}, nil}, 400, "invalid_request", `field "webhook_url" is not valid UTF-8`),
		Entry("a field name that is not UTF-8", hostile{"POST", "/v1/short-templates",
			raw("{\"nam\xe9\":\"x\",\"target_url\":\"https://cdn.example.com/t.mp4\"}"), nil}, 400, "invalid_request", "field name is not valid UTF-8"),
		Entry("a short template body over 64 KiB", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"` + strings.Repeat("n", 70<<10) + `","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 413, "payload_too_large", "larger than"),
		Entry("a face over 10 MiB (body under 16 MiB)", hostile{"POST", "/v1/videos/short",
			shortWith(strings.Repeat("A", 14<<20)), nil}, 400, "invalid_request", `"face"`),
		Entry("a PNG header claiming 100000×100000 pixels", hostile{"POST", "/v1/videos/short",
			func(t templates) any { return map[string]any{"template_id": t.short, "face": pngBomb(100000)} }, nil}, 400, "invalid_request", "exceeds the limit"),
		Entry("a control character in the Idempotency-Key", hostile{"POST", "/v1/videos/short", shortWith("https://cdn.example.com/f.jpg"),
			[]string{"Idempotency-Key", "a\tb"}}, 400, "invalid_request", "Idempotency-Key"),
		Entry("a list limit of -1", hostile{"GET", "/v1/tasks?limit=-1", nil, nil}, 400, "invalid_request", `"limit"`),
		Entry("a list limit of 2^63", hostile{"GET", "/v1/tasks?limit=9223372036854775808", nil, nil}, 400, "invalid_request", `"limit"`),
		Entry("a dot-dot task id", hostile{"GET", "/v1/tasks/..%2F..%2Fbalance", nil, nil}, 404, "not_found", ""),
		Entry("a cancel of a dot-dot task id", hostile{"POST", "/v1/tasks/%2e%2e/cancel", nil, nil}, 404, "not_found", ""),
		// The mux would redirect these to the cleaned path with an HTML body.
		Entry("a task path ending in ..", hostile{"GET", "/v1/tasks/..", nil, nil}, 404, "not_found", ""),
		Entry("a path with . and // segments", hostile{"POST", "/v1/videos/./short", shortWith("https://cdn.example.com/f.jpg"), nil}, 404, "not_found", ""),
		Entry("a path outside /v1", hostile{"GET", "/admin", nil, nil}, 404, "not_found", ""),

		// Every stored string at its CRD's maxLength plus one: a 400 naming the field, before
		// anything is stored (the kube-apiserver's "Too long" was a 500, again on every replay).
		Entry("a face URL over 2048 characters", hostile{"POST", "/v1/videos/short", shortWith(longURL(3 << 10)), nil}, 400, "invalid_request", `"face" must be at most 2048 characters`),
		Entry("a pose face URL of 2 MB", hostile{"POST", "/v1/images/pose", func(t templates) any {
			return map[string]any{"template_id": t.short, "face": longURL(2 << 20)}
		}, nil}, 400, "invalid_request", `"face" must be at most 2048 characters`),
		Entry("a video URL of 2049 characters", hostile{"POST", "/v1/videos/eraser", eraserWith(longURL(2049)), nil}, 400, "invalid_request", `"video" must be at most 2048 characters`),
		Entry("a webhook URL of 2049 characters", hostile{"POST", "/v1/videos/template", webhookWith(longURL(2049)), nil}, 400, "invalid_request", `"webhook_url" must be at most 2048 characters`),
		Entry("an eraser webhook URL of 3 KB", hostile{"POST", "/v1/videos/eraser", func(templates) any {
			return map[string]any{"video": "https://cdn.example.com/v.mp4", "webhook_url": longURL(3 << 10)}
		}, nil}, 400, "invalid_request", `"webhook_url" must be at most 2048 characters`),
		Entry("a template id of 254 characters", hostile{"POST", "/v1/videos/short", func(templates) any {
			return map[string]any{"template_id": strings.Repeat("t", 254), "face": "https://cdn.example.com/f.jpg"}
		}, nil}, 400, "invalid_request", `"template_id" must be at most 253 characters`),
		Entry("a template id of 15 MB", hostile{"POST", "/v1/videos/template", func(templates) any {
			return map[string]any{"template_id": strings.Repeat("t", 15<<20), "duration": 2}
		}, nil}, 400, "invalid_request", `"template_id" must be at most 253 characters`),
		Entry("a short template name of 129 characters", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"` + strings.Repeat("é", 129) + `","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `"name" must be at most 128 characters`),
		Entry("a short template target of 2049 characters", hostile{"POST", "/v1/short-templates", func(templates) any {
			return map[string]any{"name": "t", "target_url": longURL(2049)}
		}, nil}, 400, "invalid_request", `"target_url" must be at most 2048 characters`),
		Entry("a short template cover of 2049 characters", hostile{"POST", "/v1/short-templates", func(templates) any {
			return map[string]any{"name": "t", "target_url": "https://cdn.example.com/t.mp4", "cover_url": longURL(2049)}
		}, nil}, 400, "invalid_request", `"cover_url" must be at most 2048 characters`),
		Entry("a 15 MB unknown field name", hostile{"POST", "/v1/videos/short",
			raw(`{"` + strings.Repeat("k", 15<<20) + `":1}`), nil}, 400, "invalid_request", "unknown field"),
		Entry("a 15 MB number", hostile{"POST", "/v1/videos/template", durationOf("1" + strings.Repeat("0", 15<<20)), nil}, 400, "invalid_request", `"duration"`),

		// encoding/json matches names case-insensitively and keeps the last of duplicate keys.
		Entry("a field name in another case", hostile{"POST", "/v1/videos/short", func(t templates) any {
			return map[string]any{"Template_ID": t.short, "face": "https://cdn.example.com/f.jpg"}
		}, nil}, 400, "invalid_request", `unknown field "Template_ID"`),
		Entry("a name and its upper-case twin", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a","NAME":"b","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `unknown field "NAME"`),
		Entry("a duplicate key", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a","name":"b","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `field "name" appears more than once`),
		Entry("a duplicate template id", hostile{"POST", "/v1/videos/short", func(t templates) any {
			return `{"template_id":"` + t.short + `","face":"https://cdn.example.com/f.jpg","template_id":"` + t.short + `"}`
		}, nil}, 400, "invalid_request", `field "template_id" appears more than once`),

		// Content types: JSON in UTF-8 only; curl -d's form label only on a JSON object.
		Entry("charset=utf-16", hostile{"POST", "/v1/videos/short", shortWith("https://cdn.example.com/f.jpg"),
			[]string{"Content-Type", "application/json; charset=utf-16"}}, 415, "unsupported_media_type", "UTF-8"),
		Entry("a UTF-16 body with a byte order mark", hostile{"POST", "/v1/videos/short", raw("\xff\xfe{\x00}\x00"), nil}, 415, "unsupported_media_type", "UTF-8"),
		Entry("a real form body", hostile{"POST", "/v1/videos/short", raw("template_id=x&face=https%3A%2F%2Fcdn.example.com%2Ff.jpg"),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type", "JSON"),
		Entry("a form body on a short template", hostile{"POST", "/v1/short-templates", raw("name=x"),
			[]string{"Content-Type", "application/x-www-form-urlencoded"}}, 415, "unsupported_media_type", "JSON"),

		Entry("duration 5.5", hostile{"POST", "/v1/videos/template", durationOf("5.5"), nil}, 400, "invalid_request", `field "duration" must be an integer, not 5.5`),
		Entry("duration as a string", hostile{"POST", "/v1/videos/template", durationOf(`"5"`), nil}, 400, "invalid_request", `field "duration" must be an integer, not a string`),

		// Hosts as resolvers read them (IDNA), and ports.
		Entry("the metadata address with ideographic dots", hostile{"POST", "/v1/videos/short", shortWith("http://169。254。169。254/x.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("loopback in full-width letters", hostile{"POST", "/v1/videos/eraser", eraserWith("http://ＬＯＣＡＬＨＯＳＴ/v.mp4"), nil}, 400, "invalid_request", `"video"`),
		Entry("port 0", hostile{"POST", "/v1/videos/template", webhookWith("https://hooks.example.com:0/x"), nil}, 400, "invalid_request", `"webhook_url"`),
		Entry("port 99999", hostile{"POST", "/v1/videos/short", shortWith("https://cdn.example.com:99999/f.jpg"), nil}, 400, "invalid_request", `"face"`),
		Entry("a short template target on port 99999", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"t","target_url":"https://cdn.example.com:99999/t.mp4"}`), nil}, 400, "invalid_request", `"target_url"`),

		Entry("a NUL in a short template name", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a\u0000b","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `"name" must not contain control characters`),
		Entry("a newline in a short template name", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a\nb","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `"name" must not contain control characters`),
		Entry("a right-to-left override in a short template name", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"invoice\u202Egpj.exe","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `"name"`),
		Entry("a line separator in a short template name", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a\u2028b","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `line separators`),
		Entry("a zero-width space in a short template name", hostile{"POST", "/v1/short-templates",
			raw(`{"name":"a\u200Bb","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `zero-width spaces`),
		Entry("a short template name of spaces", hostile{"POST", "/v1/short-templates",
			raw(`{"name":" \u3000 ","target_url":"https://cdn.example.com/t.mp4"}`), nil}, 400, "invalid_request", `"name" must not be empty`),
		Entry("a 512 KB task id in the path", hostile{"GET", "/v1/tasks/" + strings.Repeat("x", 512<<10), nil, nil}, 404, "not_found", "no task with id"),
		Entry("a 512 KB short template id in the path", hostile{"DELETE", "/v1/short-templates/" + strings.Repeat("x", 512<<10), nil, nil}, 404, "not_found", "no short template"),
		Entry("a 512 KB path", hostile{"GET", "/v1/" + strings.Repeat("x", 512<<10), nil, nil}, 404, "not_found", "no such endpoint"),
	)

	// Integer forms of IPv4 that url.Parse accepts and netip.ParseAddr does not read as an
	// address; a backend built on getaddrinfo (C, Python, curl) reads 2130706433 and
	// 0177.0.0.1 as 127.0.0.1, so netguard reads them the same way.
	DescribeTable("refuses IPv4 written as integers, octal or hex",
		func(video string) {
			resp := api.post("/v1/videos/eraser", a.key, map[string]any{"video": video})
			Expect(resp.Status).To(Equal(http.StatusBadRequest), string(resp.Body))
			expectNothingChanged()
		},
		Entry("decimal", "http://2130706433/v.mp4"),
		Entry("octal", "http://0177.0.0.1/v.mp4"),
		Entry("hex", "http://0x7f.0.0.1/v.mp4"),
		Entry("short form", "http://127.1/v.mp4"),
		Entry("with a trailing dot", "http://192.168.1.1./v.mp4"),
		Entry("short form with a trailing dot", "http://127.1./v.mp4"),
		Entry("hex with a trailing dot", "http://0x7f.1./v.mp4"),
	)

	// A value quoted back in a message is cut to 64 bytes with its length said, whichever
	// check refuses it.
	DescribeTable("quotes a long value back cut to 64 bytes, with its length",
		func(path string, body func(templates) map[string]any, length int) {
			resp := api.post(path, a.key, body(tmpl))
			Expect(resp.Status).To(Equal(http.StatusBadRequest), truncated(resp.Body))
			Expect(resp.Message()).To(ContainSubstring("(%d bytes)", length))
			Expect(len(resp.Message())).To(BeNumerically("<", 200), resp.Message())
			expectNothingChanged()
		},
		Entry("an unknown template id of 253 characters", "/v1/videos/short", func(templates) map[string]any {
			return map[string]any{"template_id": longTemplateID("no-such"), "face": "https://cdn.example.com/f.jpg"}
		}, 253),
		Entry("a template id of 253 characters for another capability", "/v1/videos/short", func(templates) map[string]any {
			id := longTemplateID(envsuite.Unique("eraser"))
			t := &videogenv1alpha1.Template{ObjectMeta: objectMeta(id), Spec: videogenv1alpha1.TemplateSpec{
				Capability: videogenv1alpha1.CapabilityEraser, DisplayName: "long", MediaURL: "https://cdn.example.com/m.mp4"}}
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			DeferCleanup(func() { Expect(k8sClient.Delete(ctx, t)).To(Succeed()) })
			return map[string]any{"template_id": id, "face": "https://cdn.example.com/f.jpg"}
		}, 253),
		Entry("a URL scheme of 100 characters", "/v1/videos/short", func(t templates) map[string]any {
			return map[string]any{"template_id": t.short, "face": strings.Repeat("s", 100) + "://cdn.example.com/f.jpg"}
		}, 100),
		Entry("a numeric port of 100 digits", "/v1/videos/eraser", func(templates) map[string]any {
			return map[string]any{"video": "https://cdn.example.com:" + strings.Repeat("9", 100) + "/v.mp4"}
		}, 100),
		Entry("a port of 100 letters", "/v1/videos/eraser", func(templates) map[string]any {
			return map[string]any{"video": "https://cdn.example.com:" + strings.Repeat("p", 100) + "/v.mp4"}
		}, 101),
		Entry("a loopback address written in 100 characters", "/v1/videos/eraser", func(templates) map[string]any {
			return map[string]any{"video": "http://0x" + strings.Repeat("0", 94) + "7f.1/v.mp4"}
		}, 100),
	)

	It("refuses two Idempotency-Key headers", func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/v1/videos/short",
			strings.NewReader(`{"template_id":"`+tmpl.short+`","face":"https://cdn.example.com/f.jpg"}`))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+a.key)
		req.Header["Idempotency-Key"] = []string{"one", "two"}
		resp, err := api.http.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		expectNothingChanged()
	})

	It("keeps an Idempotency-Key to its account: another account's same key is its own task", func() {
		key := envsuite.Unique("shared-key")
		mine := api.post("/v1/videos/short", a.key, shortWith("https://cdn.example.com/a.jpg")(tmpl), "Idempotency-Key", key)
		Expect(mine.Status).To(Equal(http.StatusAccepted), string(mine.Body))
		// A different body under the same key elsewhere is neither a replay nor a reuse.
		theirs := api.post("/v1/videos/short", bystander.key, shortWith("https://cdn.example.com/b.jpg")(tmpl), "Idempotency-Key", key)
		Expect(theirs.Status).To(Equal(http.StatusAccepted), string(theirs.Body))
		Expect(theirs.Header.Get("Idempotent-Replayed")).To(BeEmpty())
		Expect(theirs.JSON()["id"]).NotTo(Equal(mine.JSON()["id"]))
		Expect(tasksIn(a.ns)).To(HaveLen(1))
		Expect(tasksIn(bystander.ns)).To(HaveLen(1))
		expectCharged(a.ns, 90, 10)
		expectCharged(bystander.ns, 90, 10)
	})
})
