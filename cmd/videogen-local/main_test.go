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

// --demo-points is the demo account's first top-up: one the top-up could not credit is refused
// at parse time. Before, --demo-points=-5 seeded a debit of 5, refused on the new account's 0
// points (DebitExceedsBalance), leaving the demo account empty without a word; 2000000000 was
// refused by the PointTopUp schema only at seeding, once the control plane ran; 0 quietly
// became 1000.
func TestDemoPointsOutOfRangeAreRefusedBeforeStart(t *testing.T) {
	for _, v := range []string{"-5", "0", "1000000001"} {
		var cfg localstack.Config
		fs, _ := flags(&cfg)
		fs.Init("videogen-local", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := fs.Parse([]string{"--demo-points=" + v}); err == nil || !strings.Contains(err.Error(), "--demo-points must be from 1 to 1000000000") {
			t.Errorf("--demo-points=%s: parse error %v, want the range refused", v, err)
		}
	}
	for _, c := range []struct {
		args []string
		want int64
	}{{nil, 1000}, {[]string{"--demo-points=1"}, 1}, {[]string{"--demo-points=1000000000"}, 1000000000}} {
		var cfg localstack.Config
		fs, _ := flags(&cfg)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if cfg.DemoPoints != c.want {
			t.Errorf("%v: DemoPoints %d, want %d", c.args, cfg.DemoPoints, c.want)
		}
	}
}
