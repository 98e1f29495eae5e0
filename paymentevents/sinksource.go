package paymentevents

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
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
// configuration stays in force.
type FileSinks struct {
	path     string
	log      logr.Logger
	interval time.Duration

	mu        sync.Mutex
	cfg       *SinkConfig
	stamp     fileStamp
	checkedAt time.Time
}

type fileStamp struct {
	modTime time.Time
	size    int64
}

// NewFileSinks loads path, failing when it cannot be read or is invalid: a manager started
// with a broken configuration should say so at once.
func NewFileSinks(path string, log logr.Logger) (*FileSinks, error) {
	f := &FileSinks{path: path, log: log, interval: time.Second}
	cfg, stamp, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cfg, f.stamp, f.checkedAt = cfg, stamp, time.Now()
	return f, nil
}

// Current implements SinkSource; it looks at the file at most once a second.
func (f *FileSinks) Current() *SinkConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checkedAt) < f.interval {
		return f.cfg
	}
	f.checkedAt = time.Now()
	info, err := os.Stat(f.path)
	if err != nil || (fileStamp{info.ModTime(), info.Size()}) == f.stamp {
		return f.cfg
	}
	cfg, stamp, err := f.load()
	if err != nil {
		f.stamp = stamp // report a broken file once, not on every look
		f.log.Error(err, "payment event sinks changed but cannot be used; keeping the previous configuration", "path", f.path)
		return f.cfg
	}
	f.cfg, f.stamp = cfg, stamp
	f.log.Info("payment event sinks reloaded", "path", f.path, "sinks", len(cfg.Sinks))
	return f.cfg
}

func (f *FileSinks) load() (*SinkConfig, fileStamp, error) {
	info, err := os.Stat(f.path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("payment event sinks: %w", err)
	}
	stamp := fileStamp{info.ModTime(), info.Size()}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, stamp, fmt.Errorf("payment event sinks: %w", err)
	}
	cfg, err := ParseSinkConfig(data)
	if err != nil {
		return nil, stamp, fmt.Errorf("%s: %w", f.path, err)
	}
	return cfg, stamp, nil
}
