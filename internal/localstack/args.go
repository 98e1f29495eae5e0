package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// binary is the path of program (manager, apiserver, worker) in the stack's BinDir.
func (s *Stack) binary(program string) (string, error) {
	bin := filepath.Join(s.cfg.BinDir, program)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is missing: build it with make build-all (make run does)", bin)
	}
	return bin, nil
}

// ownFlagHints name videogen-local's flag for a flag the stack sets itself, where it has one.
var ownFlagHints = map[string]string{
	"manager metrics-bind-address":   "--manager-metrics-address",
	"apiserver metrics-bind-address": "--api-metrics-address",
	"apiserver bind-address":         "--api-address",
	"manager default-price":          "--default-price",
	"manager backends-config":        "--backends-config",
	"apiserver default-price":        "--default-price",
}

// checkArgs refuses, before anything starts, an extra flag (Config.ManagerArgs, APIArgs) that
// would otherwise show only as a component that crashed or never became ready: one not written
// --name=value, one the stack sets itself to wire the components together, or one the binary
// refuses. The binary judges the last: run with the flags and then --help, Go's flag package
// exits 2 naming an unknown flag or a value it cannot parse, and 0 (after the usage) when every
// flag parsed. A value that parses but is wrong (a sink file that is missing) is the
// component's to refuse when it starts, as deployed.
func (s *Stack) checkArgs(ctx context.Context) error {
	checked := map[string]bool{}
	for _, c := range s.commands(wiring{}) {
		// apiserver-2, …: replicas take the first one's flags.
		program, _, _ := strings.Cut(c.name, "-")
		if len(c.extra) == 0 || checked[program] {
			continue
		}
		checked[program] = true
		// --kubeconfig: the stack's own, given in $KUBECONFIG. --default-price: the manager
		// prices kubectl's tasks and the apiserver the REST API's, so it is one value for both
		// (Config.DefaultPrice), set or not.
		own := map[string]bool{"kubeconfig": true, "default-price": true}
		for _, a := range c.own {
			name, _ := flagName(a)
			own[name] = true
		}
		for _, a := range c.extra {
			name, ok := flagName(a)
			switch {
			case !ok:
				return fmt.Errorf("%s flag %q: give each flag whole, as --name=value", program, a)
			case name == "h" || name == "help":
				return fmt.Errorf("%s flag %q: run %s --help to list its flags", program, a, filepath.Join(s.cfg.BinDir, program))
			case own[name]:
				hint := ""
				if h, ok := ownFlagHints[program+" "+name]; ok {
					hint = "; use videogen-local's " + h
				}
				return fmt.Errorf("%s flag %q: videogen-local sets --%s itself, to wire the stack together%s", program, a, name, hint)
			}
		}
		if err := s.parseArgs(ctx, program, c.extra); err != nil {
			return err
		}
	}
	return nil
}

// parseArgs has program's flag parsing judge args (see checkArgs).
func (s *Stack) parseArgs(ctx context.Context, program string, args []string) error {
	bin, err := s.binary(program)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(slices.Clip(args), "--help")...).CombinedOutput()
	if err == nil {
		return nil
	}
	// What precedes the usage is flag's own message: "flag provided but not defined: -x",
	// `invalid value "y" for flag -x: …`.
	reason, _, _ := strings.Cut(string(out), "\nUsage of ")
	reason = strings.TrimSpace(reason)
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() == 2 && reason != "" {
		return fmt.Errorf("%s refuses the flags %s: %s (%s --help lists them)", program, strings.Join(args, " "), reason, bin)
	}
	return fmt.Errorf("checking the %s flags %s with %s --help: %v\n%s", program, strings.Join(args, " "), bin, err, out)
}

// flagName is the name of a flag written -name=value or --name=value; ok is false otherwise.
func flagName(arg string) (name string, ok bool) {
	if !strings.HasPrefix(arg, "-") {
		return "", false
	}
	name, _, ok = strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
	return name, ok && name != "" && !strings.HasPrefix(name, "-")
}
