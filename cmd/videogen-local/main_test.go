package main

import (
	"flag"
	"io"
	"strconv"
	"strings"
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

// --default-price is refused at parse time when the manager and the apiserver would refuse it:
// before, --default-price=-1 started etcd, kube-apiserver, the worker, the manager and the
// apiserver, and the stack stopped only when the manager exited on it.
func TestDefaultPriceOutOfRangeIsRefusedBeforeStart(t *testing.T) {
	for _, v := range []string{"-1", "1000000001"} {
		var cfg localstack.Config
		fs, _ := flags(&cfg)
		fs.Init("videogen-local", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		err := fs.Parse([]string{"--default-price=" + v})
		if err == nil || !strings.Contains(err.Error(), "--default-price must be from 0 to 1000000000") {
			t.Errorf("--default-price=%s: parse error %v, want the range refused", v, err)
		}
		if cfg.DefaultPrice != nil {
			t.Errorf("--default-price=%s: DefaultPrice set to %d", v, *cfg.DefaultPrice)
		}
	}
	for _, v := range []int64{0, 25, 1000000000} {
		var cfg localstack.Config
		fs, _ := flags(&cfg)
		if err := fs.Parse([]string{"--default-price=" + strconv.FormatInt(v, 10)}); err != nil {
			t.Fatalf("--default-price=%d: %v", v, err)
		}
		if cfg.DefaultPrice == nil || *cfg.DefaultPrice != v {
			t.Errorf("--default-price=%d: DefaultPrice %v", v, cfg.DefaultPrice)
		}
	}
}
