// Command capdrop-runc is an OCI runtime for dockerd that removes, from every container and
// every exec, the capabilities this machine's bounding set cannot grant, and then runs runc
// with the same arguments.
//
// Why: kind creates its nodes with `docker run --privileged`, which asks for every capability.
// Where the machine's own bounding set lacks one (CAP_SYS_RESOURCE on the CI machines of this
// project), runc fails with "unable to apply caps: operation not permitted" and no node starts.
// Dropping only what cannot be had anyway changes nothing else: on a machine with every
// capability this runtime is a plain runc. hack/kind/setup-docker.sh registers it as dockerd's
// default runtime.
//
//	capdrop-runc [runc global flags] create --bundle DIR ...   rewrites DIR/config.json
//	capdrop-runc [runc global flags] exec --process FILE ...   rewrites FILE
//
// Env: CAPDROP_RUNC (the real runc, default: runc on PATH).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "capdrop-runc: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	grantable, err := boundingSet("/proc/self/status")
	if err != nil {
		return err
	}
	for _, file := range specFiles(args) {
		if err := dropUngrantable(file, grantable); err != nil {
			return err
		}
	}
	runc := os.Getenv("CAPDROP_RUNC")
	if runc == "" {
		if runc, err = exec.LookPath("runc"); err != nil {
			return err
		}
	}
	return syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
}

// specFiles names the OCI files runc will read for this call: the bundle's config.json of a
// create or run, the process file of an exec.
func specFiles(args []string) []string {
	var files []string
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		switch flag {
		case "--bundle", "-b":
			files = append(files, filepath.Join(value, "config.json"))
		case "--process", "-p":
			files = append(files, value)
		}
	}
	return files
}

// capNames lists the capabilities by number (linux/capability.h), as OCI specs name them.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// boundingSet reads which capabilities this process may still grant (CapBnd in proc(5)).
func boundingSet(statusFile string) (map[string]bool, error) {
	raw, err := os.ReadFile(statusFile)
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		hex, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: CapBnd %q: %w", statusFile, hex, err)
		}
		set := map[string]bool{}
		for bit, name := range capNames {
			if mask&(1<<bit) != 0 {
				set[name] = true
			}
		}
		return set, nil
	}
	return nil, fmt.Errorf("%s has no CapBnd line", statusFile)
}

// dropUngrantable removes from every capability list of an OCI config.json (process.
// capabilities) or exec process file (capabilities) the names not in grantable. Capabilities
// this program does not know by number are kept: runc knows better.
func dropUngrantable(file string, grantable map[string]bool) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// UseNumber: a spec's 64-bit limits must survive the round trip exactly.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	caps := doc["capabilities"]
	if process, ok := doc["process"].(map[string]any); ok {
		caps = process["capabilities"]
	}
	lists, ok := caps.(map[string]any)
	if !ok {
		return nil
	}
	known := map[string]bool{}
	for _, name := range capNames {
		known[name] = true
	}
	changed := false
	for kind, list := range lists {
		names, ok := list.([]any)
		if !ok {
			continue
		}
		kept := names[:0:0]
		for _, n := range names {
			if name, ok := n.(string); ok && known[name] && !grantable[name] {
				changed = true
				continue
			}
			kept = append(kept, n)
		}
		lists[kind] = kept
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode().Perm())
}
