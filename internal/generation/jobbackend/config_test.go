package jobbackend

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLoadConfigReadsTheExampleFile(t *testing.T) {
	cfg, err := LoadConfig("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "" || *cfg.ActiveDeadlineSeconds != 1800 || *cfg.BackoffLimit != 1 || *cfg.TTLSecondsAfterFinished != 3600 {
		t.Fatalf("limits = %q %d %d %d", cfg.Namespace, *cfg.ActiveDeadlineSeconds, *cfg.BackoffLimit, *cfg.TTLSecondsAfterFinished)
	}
	short := cfg.Capabilities["video.short"]
	gpu := short.Template.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]
	if gpu.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("gpu limit = %s, want 1", gpu.String())
	}
	if got := short.resultContainer(); got != "faceswap" {
		t.Fatalf("video.short result container = %q, want the first container", got)
	}
	eraser := cfg.Capabilities["video.eraser"]
	if got := eraser.resultContainer(); got != "eraser" || !eraser.InputArgs {
		t.Fatalf("video.eraser result container = %q, inputArgs = %v", got, eraser.InputArgs)
	}
}

func TestParseConfigFillsInDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
capabilities:
  image.pose:
    template: {spec: {containers: [{name: pose, image: example.com/pose:1}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.ActiveDeadlineSeconds != DefaultActiveDeadlineSeconds || *cfg.BackoffLimit != DefaultBackoffLimit ||
		*cfg.TTLSecondsAfterFinished != DefaultTTLSecondsAfterFinished {
		t.Fatalf("defaults = %d %d %d", *cfg.ActiveDeadlineSeconds, *cfg.BackoffLimit, *cfg.TTLSecondsAfterFinished)
	}
}

func TestParseConfigExplainsWhatIsWrong(t *testing.T) {
	const ok = `{spec: {containers: [{name: main, image: example.com/x:1}]}}`
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown capability", "capabilities: {video.shrt: {template: " + ok + "}}",
			[]string{"capabilities[video.shrt]: unknown capability (known: video.short, video.eraser, video.template, image.pose)"}},
		{"no capabilities", "backoffLimit: 1",
			[]string{"capabilities: at least one capability needs a pod template"}},
		{"no containers", "capabilities: {video.short: {template: {spec: {containers: []}}}}",
			[]string{"capabilities[video.short].template.spec.containers: at least one container is required"}},
		{"container without image", "capabilities: {video.short: {template: {spec: {containers: [{name: a}]}}}}",
			[]string{"capabilities[video.short].template.spec.containers[0].image: is required"}},
		{"duplicate container names", "capabilities: {video.short: {template: {spec: {initContainers: [{name: a, image: i}], containers: [{name: a, image: i}]}}}}",
			[]string{`capabilities[video.short].template.spec.containers[0].name: "a" is used by another container`}},
		{"reserved env", "capabilities: {video.short: {template: {spec: {containers: [{name: a, image: i, env: [{name: VIDEOGEN_TASK, value: x}]}]}}}}",
			[]string{"containers[0].env[0]: VIDEOGEN_TASK is reserved"}},
		{"restart policy", "capabilities: {video.short: {template: {spec: {restartPolicy: Always, containers: [{name: a, image: i}]}}}}",
			[]string{"template.spec.restartPolicy: must be Never or left out"}},
		{"result container", "capabilities: {video.short: {resultContainer: nope, template: " + ok + "}}",
			[]string{`capabilities[video.short].resultContainer: "nope" is not one of template.spec.containers`}},
		{"limits and namespace", "namespace: Bad_NS\nactiveDeadlineSeconds: 0\nbackoffLimit: -1\nttlSecondsAfterFinished: 5\ncapabilities: {video.short: {template: " + ok + "}}",
			[]string{"namespace: \"Bad_NS\" is not a namespace name", "activeDeadlineSeconds: must be positive, got 0",
				"backoffLimit: must not be negative, got -1", "ttlSecondsAfterFinished: must be at least 60"}},
		{"unknown field", "capabilites: {}", []string{`unknown field "capabilites"`}},
		{"not yaml", "capabilities: [", []string{"decoding:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatal("ParseConfig accepted the config")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	_, err := LoadConfig("testdata/missing.yaml")
	if err == nil || !strings.Contains(err.Error(), "testdata/missing.yaml") {
		t.Fatalf("error = %v, want one naming the file", err)
	}
}
