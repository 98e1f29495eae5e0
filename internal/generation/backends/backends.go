// Package backends reads the manager's --backends-config file: which generation backend serves
// which capability.
//
//	backends:
//	- name: reference-worker            # shown in task status and events
//	  capabilities: [video.short, video.eraser, video.template, image.pose]
//	  http:                              # the HTTP protocol of docs/backend-protocol.md
//	    url: http://videogen-worker.videogen-system.svc:8080
//	    tokenFile: /etc/videogen/worker/token   # optional bearer token
//	    requestTimeout: 15s                     # optional
//	- name: gpu-jobs
//	  capabilities: [video.short]
//	  job:                               # Kubernetes Jobs, see docs/job-backend.md
//	    configFile: /etc/videogen/jobs.yaml
//
// A capability may be served by one backend only. A capability no backend serves keeps its
// tasks queued until they time out (and are refunded).
package backends

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/bearer"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
)

// File is the configuration file.
type File struct {
	Backends []Entry `json:"backends"`
}

// Entry is one backend.
type Entry struct {
	Name         string                        `json:"name"`
	Capabilities []videogenv1alpha1.Capability `json:"capabilities"`
	HTTP         *HTTP                         `json:"http,omitempty"`
	Job          *Job                          `json:"job,omitempty"`
}

// HTTP configures an httpbackend.
type HTTP struct {
	URL            string   `json:"url"`
	TokenFile      string   `json:"tokenFile,omitempty"`
	RequestTimeout Duration `json:"requestTimeout,omitempty"`
}

// Job configures a jobbackend.
type Job struct {
	ConfigFile string `json:"configFile"`

	config *jobbackend.Config // read by Read
}

// Duration reads "15s"-style durations.
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Load reads path and builds the routes. c is the manager's client (Job backends use it).
func Load(path string, c client.Client) (generation.Routes, error) {
	f, err := Read(path)
	if err != nil {
		return nil, err
	}
	return f.Routes(c)
}

// Read parses path and the Job configs it names, without building any backend.
func Read(path string) (File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("backends config: %w", err)
	}
	var f File
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return File{}, fmt.Errorf("backends config %s: %w", path, err)
	}
	for i := range f.Backends {
		if j := f.Backends[i].Job; j != nil {
			cfg, err := jobbackend.LoadConfig(j.ConfigFile)
			if err != nil {
				return File{}, fmt.Errorf("backends[%d] (%q): %w", i, f.Backends[i].Name, err)
			}
			j.config = &cfg
		}
	}
	return f, nil
}

// CacheByObject is what the manager's cache must watch for these backends: the Jobs and
// Pods that Job backends create, and only those. One entry per type, in every namespace a Job
// backend runs Jobs in (all, when one runs them in its tasks' own): the cache keeps one entry
// per type, so an entry per Job backend would leave all but one of them unable to read theirs.
func (f File) CacheByObject() map[client.Object]cache.ByObject {
	out := map[client.Object]cache.ByObject{}
	byType := map[string]client.Object{}
	for _, e := range f.Backends {
		if e.Job == nil || e.Job.config == nil {
			continue
		}
		for obj, by := range e.Job.config.CacheByObject() {
			kind := fmt.Sprintf("%T", obj)
			first, seen := byType[kind]
			if !seen {
				byType[kind] = obj
				out[obj] = by
				continue
			}
			merged := out[first] // the same label selector: every Job backend labels its Jobs alike
			if merged.Namespaces != nil && by.Namespaces != nil {
				merged.Namespaces = maps.Clone(merged.Namespaces)
				maps.Copy(merged.Namespaces, by.Namespaces)
			} else {
				merged.Namespaces = nil // one backend runs Jobs in its tasks' namespaces: all
			}
			out[first] = merged
		}
	}
	return out
}

// Routes builds a backend per entry and routes each capability to it.
func (f File) Routes(c client.Client) (generation.Routes, error) {
	routes := generation.Routes{}
	named := map[string]int{}
	for i, e := range f.Backends {
		where := fmt.Sprintf("backends[%d] (%q)", i, e.Name)
		if e.Name == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		if first, taken := named[e.Name]; taken {
			// Stages record their backend by name, and are looked for by it (Routes.Named):
			// two of one name would each be taken for the other, at random.
			return nil, fmt.Errorf("%s: backends[%d] has the same name; give each backend a name of its own", where, first)
		}
		named[e.Name] = i
		if len(e.Capabilities) == 0 {
			return nil, fmt.Errorf("%s: list the capabilities it serves", where)
		}
		if (e.HTTP == nil) == (e.Job == nil) {
			return nil, fmt.Errorf("%s: set exactly one of http and job", where)
		}
		b, err := build(e, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		for _, capability := range e.Capabilities {
			if !capability.Valid() {
				return nil, fmt.Errorf("%s: unknown capability %q", where, capability)
			}
			if other, taken := routes[capability]; taken {
				return nil, fmt.Errorf("%s: %s is already served by %q", where, capability, other.Name)
			}
			routes[capability] = generation.Named{Name: e.Name, Backend: b}
		}
	}
	return routes, nil
}

func build(e Entry, c client.Client) (generation.Backend, error) {
	if e.HTTP != nil {
		cfg := httpbackend.Config{BaseURL: e.HTTP.URL, RequestTimeout: e.HTTP.RequestTimeout.Duration}
		if e.HTTP.TokenFile != "" {
			tok, err := os.ReadFile(e.HTTP.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("http.tokenFile: %w", err)
			}
			cfg.Token = strings.TrimSpace(string(tok))
			if err := bearer.Check(cfg.Token); err != nil {
				return nil, fmt.Errorf("http.tokenFile %s: %w", e.HTTP.TokenFile, err)
			}
		}
		return httpbackend.New(cfg)
	}
	if e.Job.config == nil {
		cfg, err := jobbackend.LoadConfig(e.Job.ConfigFile)
		if err != nil {
			return nil, err
		}
		e.Job.config = &cfg
	}
	jb, err := jobbackend.New(c, *e.Job.config)
	if err != nil {
		return nil, err
	}
	served := map[videogenv1alpha1.Capability]bool{}
	for _, capability := range jb.Capabilities() {
		served[capability] = true
	}
	for _, capability := range e.Capabilities {
		if !served[capability] {
			return nil, fmt.Errorf("job.configFile has no pod template for %s", capability)
		}
	}
	return jb, nil
}
