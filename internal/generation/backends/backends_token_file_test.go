package backends

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A backend's tokenFile that no request can carry (two lines, as an
// operator rotating tokens one a line writes it, or a control character) was loaded, trimmed at
// its ends only; the manager started and every call to the backend failed in net/http
// ("invalid header field value for Authorization") before it was sent: every task routed there
// waited for its deadline and was refunded, with nothing at start to say why. Want: Load
// refuses it, naming the file, not the token.
func TestATokenFileNoRequestCanCarryIsRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	token := write(t, dir, "token", "first-token-0123456789\nsecond-token-0123456789\n")
	cfg := write(t, dir, "backends.yaml", `
backends:
- name: worker
  capabilities: [video.eraser]
  http:
    url: http://worker.example:8080
    tokenFile: `+token+`
`)
	_, err := Load(cfg, fake.NewClientBuilder().Build())
	if err == nil || !strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "first-token") {
		t.Fatalf("Load with a two-line tokenFile: %v; want an error naming the file, not the token", err)
	}
}
