package localstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A videogen-local started on a data directory whose etcd still runs (say the old version's,
// left running by an upgrade) is refused at once, saying so, not after a minute of etcd start
// attempts ending "timeout waiting for process etcd to start"; the data directory of a first
// run, and one whose etcd has stopped, are free.
func TestStartRefusesADataDirectoryWhoseEtcdRuns(t *testing.T) {
	dir := t.TempDir()
	if err := checkDataDirFree(dir); err != nil {
		t.Fatalf("a data directory without etcd data: %v", err)
	}
	db := filepath.Join(dir, etcdDB)
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDirFree(dir); err != nil {
		t.Fatalf("a data directory whose etcd stopped: %v", err)
	}

	// The running etcd: bbolt holds an exclusive flock on its database.
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Start(context.Background(), Config{DataDir: dir, BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "is in use") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start on a data directory whose etcd runs = %v, want a refusal naming it as in use", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubeconfig")); !os.IsNotExist(err) {
		t.Errorf("the refused start touched the data directory's kubeconfig: %v", err)
	}

	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDirFree(dir); err != nil {
		t.Errorf("once the etcd stopped: %v", err)
	}
}
