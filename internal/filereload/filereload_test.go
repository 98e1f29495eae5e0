package filereload_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/filereload"
)

// parseNumber accepts a file holding one integer.
func parseNumber(raw []byte) (int, error) { return strconv.Atoi(strings.TrimSpace(string(raw))) }

type reports struct {
	values []int
	errs   []error
}

func (r *reports) add(v int, err error) {
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.values = append(r.values, v)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	// As the kubelet does: write beside, then rename over.
	if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestCurrentFollowsChangesAndKeepsTheLastGoodValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "1\n")
	var got reports
	f, err := filereload.Open(path, 0, parseNumber, got.add) // interval 0: look on every call
	if err != nil {
		t.Fatal(err)
	}
	if v := f.Current(); v != 1 {
		t.Fatalf("Current = %d at start, want 1", v)
	}
	if len(got.values)+len(got.errs) != 0 {
		t.Errorf("an unchanged file was reported: %+v", got)
	}

	write(t, path, "2\n")
	if v := f.Current(); v != 2 {
		t.Fatalf("Current = %d after the change, want 2", v)
	}
	write(t, path, "two\n")
	for range 3 {
		if v := f.Current(); v != 2 {
			t.Fatalf("Current = %d after a broken change, want the last good 2", v)
		}
	}
	if len(got.errs) != 1 || !strings.Contains(got.errs[0].Error(), path) {
		t.Errorf("errors reported = %v, want one naming %s", got.errs, path)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if v := f.Current(); v != 2 {
		t.Errorf("Current = %d while the file is missing, want 2", v)
	}
	write(t, path, "3")
	if v := f.Current(); v != 3 {
		t.Errorf("Current = %d after the file came back, want 3", v)
	}
	if want := []int{2, 3}; !slices.Equal(got.values, want) {
		t.Errorf("values reported = %v, want %v", got.values, want)
	}
}

func TestCurrentLooksAtMostOncePerInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "1")
	f, err := filereload.Open(path, time.Hour, parseNumber, func(int, error) {})
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "2")
	if v := f.Current(); v != 1 {
		t.Errorf("Current = %d within the interval, want 1 (the file was read again)", v)
	}
}

func TestOpenRefusesAMissingOrBrokenFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := filereload.Open(filepath.Join(dir, "missing"), time.Second, parseNumber, func(int, error) {}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want not exist", err)
	}
	broken := filepath.Join(dir, "broken")
	write(t, broken, "x")
	if _, err := filereload.Open(broken, time.Second, parseNumber, func(int, error) {}); err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("broken file: err = %v, want one naming it", err)
	}
}
