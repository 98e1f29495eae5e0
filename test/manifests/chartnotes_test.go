package manifests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// The chart's install notes must not send the Service CIDR back to
// worker.allowPrivateURLs. Since 2bdd4bb that value opens its ranges to every tenant's URLs (a
// face or video by URL, a short template's target_url), and the Service CIDR belongs in
// worker.allowPrivateServiceMedia, which only uploaded faces and official templates' media may
// reach. Until then NOTES.txt, printed by every `helm install` and `helm upgrade`, still said
// "Check worker.allowPrivateURLs: it must contain your cluster's Service CIDR (now )" (empty by
// the new default): an operator who did as told re-opened the blind SSRF into the cluster's
// Services that the release closes, and one who checked allowPrivateServiceMedia was never told.
func TestChartNotesAskForTheServiceCIDRInServiceMediaOnly(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	notes := read(t, filepath.Join(root, "charts", "videogen-operator", "templates", "NOTES.txt"))
	for _, line := range strings.Split(notes, "\n") {
		if strings.Contains(line, "allowPrivateURLs") && strings.Contains(line, "must contain") {
			t.Errorf("NOTES.txt asks for the Service CIDR in worker.allowPrivateURLs, which opens it to every tenant's URLs: %q", line)
		}
	}
	if !strings.Contains(notes, "worker.allowPrivateServiceMedia") {
		t.Errorf("NOTES.txt does not ask to check worker.allowPrivateServiceMedia, where the Service CIDR goes")
	}
}
