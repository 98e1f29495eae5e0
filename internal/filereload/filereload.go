// Package filereload follows a file mounted from a Secret or ConfigMap, which the kubelet
// replaces in place: the file is parsed again when its content changes, so what it configures
// changes without a restart. A change that does not parse is reported once and the last good
// value stays in force.
package filereload

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"
)

// File is the value parsed from a file, kept current. It is safe for concurrent use.
type File[T any] struct {
	path     string
	interval time.Duration
	parse    func([]byte) (T, error)
	report   func(T, error)

	mu        sync.Mutex
	value     T
	seen      [sha256.Size]byte // digest of the content last parsed, good or not
	checkedAt time.Time
}

// Open reads and parses path, failing when it cannot: a process started with a broken file
// should say so at once. Afterwards Current looks at the file at most once per interval; each
// change it finds is passed to report, with the new value in force or the error that kept the
// old one. The content is compared, not the file's times: the kubelet swaps a symlink.
func Open[T any](path string, interval time.Duration, parse func([]byte) (T, error), report func(T, error)) (*File[T], error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File[T]{path: path, interval: interval, parse: parse, report: report,
		value: v, seen: sha256.Sum256(raw), checkedAt: time.Now()}, nil
}

// Current returns the value in force, first reading the file again if interval has passed.
func (f *File[T]) Current() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checkedAt) < f.interval {
		return f.value
	}
	f.checkedAt = time.Now()
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return f.value // a swap in progress shows as a missing file for a moment
	}
	sum := sha256.Sum256(raw)
	if sum == f.seen {
		return f.value
	}
	f.seen = sum // a broken file is reported once, not on every look
	v, err := f.parse(raw)
	if err != nil {
		f.report(v, fmt.Errorf("%s: %w", f.path, err))
		return f.value
	}
	f.value = v
	f.report(v, nil)
	return f.value
}
