package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// kubeClient connects with the kubeconfig from --kubeconfig, $KUBECONFIG or ~/.kube/config, in
// its --context or current context, as kubectl does.
func (g *globals) kubeClient() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.kubeconfig != "" {
		rules.ExplicitPath = g.kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: g.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// print writes v as JSON or YAML, or calls table for the default format.
func (g *globals) print(out io.Writer, v any, table func(*tabwriter.Writer)) error {
	switch g.output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	case "table", "":
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", g.output)
}
