package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Closing the terminal that runs `make run` stops the whole stack. Interleaving: a developer
// runs `make run` and closes the terminal window (or the SSH session drops) instead of pressing
// Ctrl-C. The terminal sends SIGHUP to its foreground process group: make and videogen-local.
// Every component videogen-local starts runs in a process group of its own (so that Ctrl-C
// reaches only the launcher, which stops them in order), and so do envtest's etcd and
// kube-apiserver; none of them gets the SIGHUP. Before the fix videogen-local caught only
// SIGINT and SIGTERM, so SIGHUP killed it at once, by Go's default, without its Stop: etcd,
// kube-apiserver, the manager, the apiserver and the worker ran on, orphaned, holding
// 127.0.0.1:8080 and :8090 and the etcd data in .run, and the next `make run` said "8080 is
// taken" until the developer hunted the processes down. Here the components are stand-ins
// that sleep; the hangup is sent once the launcher has started them.
func TestHangupStopsTheStack(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs the envtest control plane (KUBEBUILDER_ASSETS)")
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, data := t.TempDir(), t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "videogen-local"), "./cmd/videogen-local")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"manager", "apiserver", "worker"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	api, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "videogen-local"), "--data-dir="+data, "--bin-dir="+bin, "--api-address="+api, "--worker-address="+worker)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var log bytes.Buffer
	go func() {
		lines := bufio.NewScanner(stderr)
		hungUp := false
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			// The last component started: the stack is up but for its readiness.
			if !hungUp && strings.HasPrefix(lines.Text(), "started apiserver") {
				hungUp = true
				_ = cmd.Process.Signal(syscall.SIGHUP)
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("videogen-local did not end after the hangup:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "started apiserver") {
		t.Fatalf("the stack never started its components:\n%s", log.String())
	}
	left := processesMentioning(data)
	for _, pid := range left {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if url, ok := bytes.CutPrefix(arg, []byte("--listen-client-urls=")); ok {
				left = append(left, processesMentioning("--etcd-servers="+string(url))...)
			}
		}
	}
	// The stand-ins exec sleep, whose command line names nothing: their pids are in the log.
	for _, m := range regexp.MustCompile(`started \S+ \(pid (\d+),`).FindAllStringSubmatch(log.String(), -1) {
		if pid, _ := strconv.Atoi(m[1]); syscall.Kill(pid, 0) == nil {
			left = append(left, pid)
		}
	}
	for _, pid := range left {
		// Ours: started by this test's videogen-local. Killed so the test leaves nothing behind.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 {
		t.Errorf("after a hangup videogen-local exited and left %d processes running (pids %v):\n%s", len(left), left, log.String())
	}
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
