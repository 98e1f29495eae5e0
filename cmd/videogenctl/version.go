package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
)

// version is set at build time (-ldflags "-X main.version=1.2.3"); otherwise the module
// version or VCS revision Go recorded in the binary is shown.
var version = ""

func clientVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && (v == "" || v == "(devel)") {
			v = "devel-" + s.Value[:min(12, len(s.Value))]
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v
}

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the cluster's Kubernetes version",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]string{"client": clientVersion()}
			if !clientOnly {
				cfg, err := o.config.ToRESTConfig()
				if err != nil {
					return fmt.Errorf("loading kubeconfig: %w", err)
				}
				dc, err := discovery.NewDiscoveryClientForConfig(cfg)
				if err != nil {
					return err
				}
				server, err := dc.ServerVersion()
				if err != nil {
					return fmt.Errorf("asking the cluster its version (--client skips it): %w", err)
				}
				v["kubernetes"] = server.GitVersion
			}
			return o.print(v, func(w io.Writer) {
				fmt.Fprintf(w, "Client:\t%s\n", v["client"])
				if s, ok := v["kubernetes"]; ok {
					fmt.Fprintf(w, "Kubernetes:\t%s\n", s)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "only the client's version")
	return cmd
}
