// Package stacktest is what the suites that drive the local stack from outside share
// (test/e2e, test/chaos, test/hostile): building the binaries, starting the stack on free
// loopback ports, and one HTTP call to it.
package stacktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"

	"github.com/videogen-dev/videogen-operator/internal/localstack"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// Build builds ./cmd/<name> of this module into dir for each name.
func Build(dir string, names ...string) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	for _, name := range names {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	}
	return nil
}

// Start starts the local stack with cfg, on free loopback ports for the REST API and the
// worker unless cfg names them.
func Start(ctx context.Context, cfg localstack.Config) (*localstack.Stack, error) {
	for _, addr := range []*string{&cfg.APIAddress, &cfg.WorkerAddress} {
		if *addr == "" {
			free, err := testenv.FreeAddr()
			if err != nil {
				return nil, err
			}
			*addr = free
		}
	}
	return localstack.Start(ctx, cfg)
}

// Reply is an HTTP answer, read in full.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call sends method base+path with key as the bearer token (none if empty). body may be nil,
// a string, bytes, or a value sent as JSON (with Content-Type: application/json); headers are
// name, value pairs set last.
func Call(ctx context.Context, c *http.Client, base, method, path, key string, body any, headers ...string) (Reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return Reply{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return Reply{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: raw}, err
}
