// Command videogenctl is the administrators' tool: accounts, top-ups, API keys, payment
// connectors and tasks, against the cluster in your kubeconfig with kubectl's flags (--context,
// --namespace, --as, ...). Installed as kubectl-videogen it is the kubectl plugin
// `kubectl videogen` (make install-plugin).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		printError(os.Stderr, err)
		os.Exit(exitCode(err))
	}
}

// printError writes err as the command's last word. Errors quote the kube-apiserver, which
// may quote what anyone wrote (an admission webhook's denial, a top-up's refusal message):
// escaped, but for the line breaks and tabs of cobra's own ("Did you mean this?\n\t…").
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "%s: %s\n", displayName(), terminalSafeLines(err.Error()))
}

// run executes one command line, writing its output to out (tests call it).
func run(ctx context.Context, args []string, out io.Writer) error {
	root := newRootCommand(out)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		return explainConnection(err)
	}
	return nil
}

// displayName is how the user called us: "kubectl videogen" when kubectl runs us as its
// plugin kubectl-videogen, else "videogenctl".
func displayName() string {
	if name, ok := strings.CutPrefix(filepath.Base(os.Args[0]), "kubectl-"); ok {
		return "kubectl " + strings.ReplaceAll(name, "_", "-")
	}
	return "videogenctl"
}

func newRootCommand(out io.Writer) *cobra.Command {
	o := &options{config: genericclioptions.NewConfigFlags(true), out: out}
	root := &cobra.Command{
		Use:   "videogenctl",
		Short: "Manage videogen accounts, points, API keys, payment connectors and tasks",
		Long: displayName() + ` manages videogen accounts, points, API keys, payment connectors and
tasks in the cluster of your kubeconfig, with kubectl's connection flags (--context,
--namespace, --as, ...). An account is a namespace with a PointAccount named default.`,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: displayName()},
		// Errors are printed once by main, without the usage text.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(out)
	flags := root.PersistentFlags()
	o.flags = flags
	o.config.Timeout = ptr.To(defaultRequestTimeout.String())
	o.config.AddFlags(flags)
	flags.StringVar(&o.keyNamespace, "key-namespace", "videogen-system", "the operator's namespace: API key and payment connector Secrets")
	flags.StringVarP(&o.output, "output", "o", "", "output format: table (default), json, yaml, kyaml, jsonpath=…, go-template=…, name (the task commands only), as kubectl's")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml", "kyaml"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("namespace", o.completeAccounts)

	root.AddGroup(&cobra.Group{ID: "admin", Title: "Accounts and points:"}, &cobra.Group{ID: "tasks", Title: "Tasks:"})
	for _, c := range []*cobra.Command{newAccountCommand(o), newTopUpCommand(o), newAPIKeyCommand(o), newConnectorsCommand(o)} {
		c.GroupID = "admin"
		root.AddCommand(c)
	}
	for _, c := range newTaskCommands(o) {
		c.GroupID = "tasks"
		root.AddCommand(c)
	}
	root.AddCommand(newVersionCommand(o))
	// Added now, not at Execute, so that `completion nosh` is refused as well.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes `videogenctl task show X` an error that says what there is,
// where cobra would print the group's help and exit 0 (it checks only the root's subcommands).
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return nil
				}
				names := []string{}
				for _, sub := range cmd.Commands() {
					if sub.IsAvailableCommand() {
						names = append(names, sub.Name())
					}
				}
				return fmt.Errorf("unknown command %q for %q; its commands: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		refuseUnknownSubcommands(c)
	}
}

// exactArgs is cobra.ExactArgs with the usage line in the error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("usage: %s", cmd.UseLine())
		}
		return nil
	}
}
