// Package versity runs a real S3-compatible server (Versity S3 Gateway, built from Go modules
// by hack/setup-versitygw.sh into bin/versitygw) on loopback for a test. Tests only.
package versity

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Server is a running S3 server.
type Server struct {
	Endpoint, AccessKey, SecretKey string
}

// Start runs the server for the test's lifetime, storing objects in a temp dir. $VERSITYGW
// overrides the binary's path.
func Start(t testing.TB) Server {
	t.Helper()
	bin := os.Getenv("VERSITYGW")
	if bin == "" {
		root, err := testenv.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no S3 server binary at %s: run hack/setup-versitygw.sh (make test does)", bin)
	}
	endpoint, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := Server{Endpoint: endpoint, AccessKey: "testaccess", SecretKey: "testsecret-0123456789"}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", s.Endpoint, "posix", t.TempDir())
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Endpoint, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("S3 server did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
