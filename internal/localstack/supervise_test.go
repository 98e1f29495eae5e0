package localstack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is the stack's progress log, read by the test while Supervise writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A component that crashes, or is killed as in a kill -9 drill, is started again with the
// same arguments, its exit and new process id logged, as its Deployment would restart it.
func TestSuperviseRestartsAComponentThatExits(t *testing.T) {
	bin, data := t.TempDir(), t.TempDir()
	// The first start crashes at once; later ones run until killed.
	script := "#!/bin/sh\nif [ ! -e \"$1/started\" ]; then touch \"$1/started\"; exit 3; fi\n" +
		// The third start exits 0, as the manager does on SIGTERM: its exit is told as such.
		"if [ ! -e \"$1/again\" ]; then touch \"$1/again\"; exec sleep 300; fi\nif [ ! -e \"$1/third\" ]; then touch \"$1/third\"; exit 0; fi\nexec sleep 300\n"
	if err := os.WriteFile(filepath.Join(bin, "worker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	progress := &syncBuffer{}
	s := &Stack{cfg: Config{BinDir: bin, DataDir: data, Log: progress}}
	if _, err := s.spawn("worker", data); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		s.Supervise(ctx)
	}()
	defer func() {
		cancel()
		<-supervised
		s.Stop()
	}()

	restarted := regexp.MustCompile(`restarted worker \(pid (\d+)\)`)
	waitFor := func(what string, n int) []string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if m := restarted.FindAllStringSubmatch(progress.String(), -1); len(m) >= n {
				return m[n-1]
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: no restart %d in the progress log:\n%s", what, n, progress.String())
		return nil
	}
	first := waitFor("after a crash", 1)
	if !strings.Contains(progress.String(), "worker exited (exit status 3); restarting it in 1s") {
		t.Errorf("the crash is not logged with its exit and the delay:\n%s", progress.String())
	}
	pid, _ := strconv.Atoi(first[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	second := waitFor("after kill -9", 2)
	if second[1] == first[1] {
		t.Errorf("the same pid %s after a restart", first[1])
	}
	// It exited again soon after its start: the delay doubled, as CrashLoopBackOff's does.
	if !strings.Contains(progress.String(), "worker exited (signal: killed); restarting it in 2s") {
		t.Errorf("the kill is not logged with a doubled delay:\n%s", progress.String())
	}
	waitFor("after exiting 0", 3)
	if !strings.Contains(progress.String(), "worker exited (exit status 0); restarting it in 4s") {
		t.Errorf("an exit 0 is not logged as such:\n%s", progress.String())
	}
	log, err := os.ReadFile(filepath.Join(data, "logs", "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(log), "---- "); got != 4 {
		t.Errorf("the worker's log has %d starts, want 4 (one file for all):\n%s", got, log)
	}
}
