package localstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// etcdDB is etcd's database under the data directory: the etcd that runs on it holds an
// exclusive flock on it (bbolt's) for as long as it runs.
var etcdDB = filepath.Join("etcd", "member", "snap", "db")

// checkDataDirFree refuses a data directory whose etcd already runs: that of another
// videogen-local (of this version or an older one, say one left running before an upgrade).
// Without this, the second etcd waits for the database's lock and envtest gives up after five
// attempts, more than a minute later, saying only "timeout waiting for process etcd to start".
// The probe takes the lock and releases it at once; a data directory without a database yet
// (a first run) is free.
func checkDataDirFree(dataDir string) error {
	path := filepath.Join(dataDir, etcdDB)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the data directory %s: %w", dataDir, err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return fmt.Errorf("the data directory %s is in use: an etcd runs on it (another videogen-local, maybe "+
			"an older version's; pgrep -af %s finds it): stop that one first (Ctrl-C), or give another --data-dir",
			dataDir, filepath.Join(dataDir, "etcd"))
	case err != nil:
		return fmt.Errorf("checking the data directory %s: locking %s: %w", dataDir, path, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
