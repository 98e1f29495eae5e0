package jobbackend

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Defaults for the Job limits a config file leaves out.
const (
	DefaultActiveDeadlineSeconds   int64 = 1800
	DefaultBackoffLimit            int32 = 1
	DefaultTTLSecondsAfterFinished int32 = 3600

	// minTTLSeconds keeps finished Jobs around long enough for the controller to read their result.
	minTTLSeconds int32 = 60
)

// Config says how each capability's stages run as Jobs. LoadConfig reads it from YAML.
type Config struct {
	// Namespace runs every Job there. Empty runs each Job in its task's namespace, where the task
	// owns it and the Job goes with the task. Owner references cannot cross namespaces, so Jobs in
	// a separate namespace are only cleaned up by Cancel and TTLSecondsAfterFinished.
	Namespace string `json:"namespace,omitempty"`
	// ActiveDeadlineSeconds bounds each stage's Job; past it the Job fails with DeadlineExceeded.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// BackoffLimit is how many failed pods a Job retries before it fails.
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// TTLSecondsAfterFinished deletes a finished Job in a separate Namespace, and its pods, after
	// this many seconds, read or not: keep it above any outage of the manager. A Job in its
	// task's namespace has none: it is deleted with its task.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// Capabilities maps each capability this backend serves to its pod template.
	Capabilities map[videogenv1alpha1.Capability]CapabilityConfig `json:"capabilities"`
	// Clock decides when a submission's cache grace ends (default the real clock).
	Clock clock.PassiveClock `json:"-"`
}

// CapabilityConfig is how one capability's stages run.
type CapabilityConfig struct {
	// Template is the pod every stage's Job runs. The backend adds the VIDEOGEN_* env vars,
	// its labels, restartPolicy Never and terminationMessagePolicy FallbackToLogsOnError.
	Template corev1.PodTemplateSpec `json:"template"`
	// ResultContainer names the container whose termination message carries the result;
	// empty means the first container.
	ResultContainer string `json:"resultContainer,omitempty"`
	// InputArgs also appends the inputs as --flag=value arguments to the result container.
	InputArgs bool `json:"inputArgs,omitempty"`
}

// LoadConfig reads and validates a YAML config file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("job backend config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("job backend config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a YAML (or JSON) config, rejecting unknown fields, fills in the defaults
// and validates it.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("decoding: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// withDefaults returns a copy with the unset Job limits filled in.
func (c Config) withDefaults() Config {
	if c.ActiveDeadlineSeconds == nil {
		c.ActiveDeadlineSeconds = ptr.To(DefaultActiveDeadlineSeconds)
	}
	if c.BackoffLimit == nil {
		c.BackoffLimit = ptr.To(DefaultBackoffLimit)
	}
	if c.TTLSecondsAfterFinished == nil {
		c.TTLSecondsAfterFinished = ptr.To(DefaultTTLSecondsAfterFinished)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Validate reports every problem in the config at once, each prefixed with its field.
func (c Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(c.Namespace) {
			fail("namespace", "%q is not a namespace name: %s", c.Namespace, msg)
		}
	}
	if c.ActiveDeadlineSeconds != nil && *c.ActiveDeadlineSeconds <= 0 {
		fail("activeDeadlineSeconds", "must be positive, got %d", *c.ActiveDeadlineSeconds)
	}
	if c.BackoffLimit != nil && *c.BackoffLimit < 0 {
		fail("backoffLimit", "must not be negative, got %d", *c.BackoffLimit)
	}
	if c.TTLSecondsAfterFinished != nil && *c.TTLSecondsAfterFinished < minTTLSeconds {
		fail("ttlSecondsAfterFinished", "must be at least %d so the result can be read before the Job is deleted, got %d",
			minTTLSeconds, *c.TTLSecondsAfterFinished)
	}
	if len(c.Capabilities) == 0 {
		fail("capabilities", "at least one capability needs a pod template")
	}
	for _, capability := range sortedCapabilities(c.Capabilities) {
		field := fmt.Sprintf("capabilities[%s]", capability)
		if !capability.Valid() {
			fail(field, "unknown capability (known: %s)", knownCapabilities())
			continue
		}
		for _, err := range c.Capabilities[capability].validate() {
			errs = append(errs, fmt.Errorf("%s.%w", field, err))
		}
	}
	return errors.Join(errs...)
}

func (cc CapabilityConfig) validate() []error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	spec := cc.Template.Spec
	if len(spec.Containers) == 0 {
		fail("template.spec.containers", "at least one container is required")
	}
	if p := spec.RestartPolicy; p != "" && p != corev1.RestartPolicyNever {
		fail("template.spec.restartPolicy", "must be Never or left out (the Job retries failed pods), got %s", p)
	}
	seen := map[string]bool{}
	check := func(list string, containers []corev1.Container) {
		for i, ctr := range containers {
			field := fmt.Sprintf("template.spec.%s[%d]", list, i)
			if ctr.Name == "" {
				fail(field+".name", "is required")
			} else if seen[ctr.Name] {
				fail(field+".name", "%q is used by another container", ctr.Name)
			}
			seen[ctr.Name] = true
			if ctr.Image == "" {
				fail(field+".image", "is required")
			}
			for j, env := range ctr.Env {
				if strings.HasPrefix(env.Name, envPrefix) {
					fail(fmt.Sprintf("%s.env[%d]", field, j), "%s is reserved: the backend sets VIDEOGEN_* variables", env.Name)
				}
			}
		}
	}
	check("initContainers", spec.InitContainers)
	check("containers", spec.Containers)
	if cc.ResultContainer != "" && !slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == cc.ResultContainer }) {
		fail("resultContainer", "%q is not one of template.spec.containers", cc.ResultContainer)
	}
	return errs
}

// resultContainer is the name of the container whose termination message carries the result.
func (cc CapabilityConfig) resultContainer() string {
	if cc.ResultContainer != "" || len(cc.Template.Spec.Containers) == 0 {
		return cc.ResultContainer
	}
	return cc.Template.Spec.Containers[0].Name
}

func sortedCapabilities(m map[videogenv1alpha1.Capability]CapabilityConfig) []videogenv1alpha1.Capability {
	out := make([]videogenv1alpha1.Capability, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

func knownCapabilities() string {
	names := make([]string, len(videogenv1alpha1.Capabilities))
	for i, c := range videogenv1alpha1.Capabilities {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
