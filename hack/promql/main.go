// Command promql parses the expression of every rule in PrometheusRule manifests (multi-document
// YAML, e.g. a kustomize or helm render on stdin) with Prometheus' own PromQL parser, so that a
// typo in an alert fails `make test` instead of the rule group at load time. The operator's
// tests check the metric names (test/manifests); this checks the syntax.
//
// A module of its own so that Prometheus stays out of the operator's go.mod.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

type prometheusRule struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(in), 4096)
	p := parser.NewParser(parser.Options{})
	rules, bad := 0, 0
	for {
		var doc prometheusRule
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			fail(err)
		}
		if doc.Kind != "PrometheusRule" {
			continue
		}
		for _, g := range doc.Spec.Groups {
			for _, r := range g.Rules {
				rules++
				if _, err := p.ParseExpr(r.Expr); err != nil {
					bad++
					fmt.Fprintf(os.Stderr, "%s, group %s, rule %s%s: %v\n", doc.Metadata.Name, g.Name, r.Alert, r.Record, err)
				}
			}
		}
	}
	if rules == 0 {
		fail(errors.New("no PrometheusRule rules on stdin"))
	}
	if bad > 0 {
		os.Exit(1)
	}
	fmt.Printf("promql: %d rule expressions parse\n", rules)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "promql:", err)
	os.Exit(1)
}
