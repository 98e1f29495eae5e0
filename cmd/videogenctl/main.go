// Command videogenctl is the administrators' tool: accounts, API keys and top-ups, against the
// cluster in your kubeconfig (or --kubeconfig).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

const usage = `videogenctl manages videogen accounts, API keys and points.

Usage:
  videogenctl account create NAME [--description TEXT]
  videogenctl account show NAME
  videogenctl apikey create --account NAME [--description TEXT]
  videogenctl apikey list [--account NAME]
  videogenctl apikey revoke ID
  videogenctl topup ACCOUNT AMOUNT --reference REF [--note TEXT] [--no-wait]
  videogenctl tasks [--account NAME] [--limit N]
  videogenctl connectors                       payment connectors and their webhook secrets

Global flags (before or after the command):
  --kubeconfig PATH        kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  --context NAME           kubeconfig context to use (default: its current context)
  --key-namespace NAME     the operator's namespace: API key and connector Secrets (default videogen-system)
  -o, --output FORMAT      table (default), json or yaml
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "videogenctl:", err)
		os.Exit(1)
	}
}

// globals are the flags every command takes.
type globals struct {
	kubeconfig   string
	context      string
	keyNamespace string
	output       string
}

func (g *globals) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file")
	fs.StringVar(&g.context, "context", "", "kubeconfig context")
	fs.StringVar(&g.keyNamespace, "key-namespace", "videogen-system", "namespace of the API key Secrets")
	fs.StringVar(&g.output, "output", "table", "table, json or yaml")
	fs.StringVar(&g.output, "o", "table", "table, json or yaml (shorthand)")
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd := args[0]
	switch cmd {
	case "topup":
		return topUpCommand(ctx, args[1:], out)
	case "tasks":
		return tasksCommand(ctx, args[1:], out)
	case "connectors":
		return connectorsCommand(ctx, args[1:], out)
	}
	if len(args) < 2 {
		return fmt.Errorf("%q needs a subcommand; see videogenctl help", cmd)
	}
	switch cmd + " " + args[1] {
	case "account create":
		return accountCreate(ctx, args[2:], out)
	case "account show":
		return accountShow(ctx, args[2:], out)
	case "apikey create":
		return apiKeyCreate(ctx, args[2:], out)
	case "apikey list":
		return apiKeyList(ctx, args[2:], out)
	case "apikey revoke":
		return apiKeyRevoke(ctx, args[2:], out)
	}
	return fmt.Errorf("unknown command %q; see videogenctl help", strings.Join(args[:2], " "))
}

// parse parses flags that may come before or after the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
