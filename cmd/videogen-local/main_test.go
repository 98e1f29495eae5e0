package main

import (
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/localstack"
)

// videogen-local's flags are its own: --kubeconfig, which controller-runtime registers on the
// global flag set, would suggest a cluster to run against, and the stack makes its own.
func TestFlagsAreTheStacksOwn(t *testing.T) {
	var cfg localstack.Config
	fs, restart := flags(&cfg)
	if f := fs.Lookup("kubeconfig"); f != nil {
		t.Errorf("videogen-local --help lists --kubeconfig (%q)", f.Usage)
	}
	if err := fs.Parse([]string{"--restart", "--more-api-address=127.0.0.1:8081", "--more-api-address=127.0.0.1:8082"}); err != nil {
		t.Fatal(err)
	}
	if !*restart || len(cfg.MoreAPIAddresses) != 2 || cfg.DataDir != ".run" {
		t.Errorf("restart %v, more replicas %v, data dir %q", *restart, cfg.MoreAPIAddresses, cfg.DataDir)
	}
}
