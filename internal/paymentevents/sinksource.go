package paymentevents

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/yaml"

	"github.com/videogen-dev/videogen-operator/internal/filereload"
)

// SinkSource yields the sink configuration in force. It is safe for concurrent use.
type SinkSource interface {
	Current() *SinkConfig
}

// StaticSinks is a fixed configuration.
type StaticSinks struct{ Config *SinkConfig }

// Current implements SinkSource.
func (s StaticSinks) Current() *SinkConfig { return s.Config }

// FileSinks reads the configuration from a file and re-reads it when the file changes (a
// mounted Secret or ConfigMap is updated in place by the kubelet), so sinks and their secrets
// change without a restart. A change that does not parse is logged and the previous
// configuration stays in force; so does a file that reads empty (no YAML content at all): a
// Secret being rewritten, not a wish for no sinks, which is said `sinks: []`.
type FileSinks struct {
	file *filereload.File[*SinkConfig]
}

// NewFileSinks loads path, failing when it cannot be read or is invalid: a manager started
// with a broken configuration should say so at once.
func NewFileSinks(path string, log logr.Logger) (*FileSinks, error) {
	return newFileSinks(path, time.Second, log)
}

func newFileSinks(path string, interval time.Duration, log logr.Logger) (*FileSinks, error) {
	file, err := filereload.Open(path, interval, parseSinkFile, func(cfg *SinkConfig, err error) {
		if err != nil {
			log.Error(err, "payment event sinks changed but cannot be used; keeping the previous configuration", "path", path)
			return
		}
		log.Info("payment event sinks reloaded", "path", path, "sinks", len(cfg.Sinks))
	})
	if err != nil {
		return nil, fmt.Errorf("payment event sinks: %w", err)
	}
	return &FileSinks{file: file}, nil
}

// Current implements SinkSource; it looks at the file at most once a second.
func (f *FileSinks) Current() *SinkConfig { return f.file.Current() }

// parseSinkFile is ParseSinkConfig refusing a file with no YAML content (empty, blank, only
// comments): read while its Secret is rewritten, it would otherwise end every due delivery
// "sink was removed" and send the events recorded meanwhile nowhere, for good.
func parseSinkFile(data []byte) (*SinkConfig, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err == nil && doc == nil {
		return nil, errors.New("payment event sinks: the file is empty (write `sinks: []` for no sinks)")
	}
	return ParseSinkConfig(data)
}
