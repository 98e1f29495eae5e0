package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpserver"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

// process is one component of the stack running as its own OS process, logging to a file.
type process struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{}
	err     error
}

func (s *Stack) spawn(name string, args ...string) (*process, error) {
	// apiserver-2, apiserver-3, …: more replicas of one binary.
	program, _, _ := strings.Cut(name, "-")
	bin, err := s.binary(program)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.path("logs"), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(s.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "POD_NAMESPACE="+SystemNamespace)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: Ctrl-C in the terminal reaches the launcher, which stops children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(logFile, "---- %s %s %s\n", time.Now().UTC().Format(time.RFC3339), name, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logFile, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	return p, nil
}

// exit is how an exited process ended, as exec says it ("exit status 3", "signal: killed"),
// also when it exited 0: Wait's error is nil then, and the progress line said "(<nil>)".
func (p *process) exit() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for grace, then SIGKILLs.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (s *Stack) startProcesses(ctx context.Context) error {
	workerToken, err := s.secretFile("worker-token", "wkr_", &s.WorkerToken)
	if err != nil {
		return err
	}
	backends, err := s.backendsConfig(workerToken)
	if err != nil {
		return err
	}
	tokens, err := s.secretFile("event-service-tokens", "evs_", &s.EventServiceToken)
	if err != nil {
		return err
	}
	ledgerToken, err := s.ledgerToken(ctx)
	if err != nil {
		return err
	}
	ledgerAddr, err := testenv.FreeAddr()
	if err != nil {
		return err
	}
	w := wiring{workerToken: workerToken, backends: backends, eventTokens: tokens, ledgerToken: ledgerToken, ledgerAddr: ledgerAddr}
	for _, c := range s.commands(w) {
		if c.name == "worker" && s.cfg.Backend != "" {
			continue
		}
		p, err := s.spawn(c.name, c.args()...)
		if err != nil {
			return err
		}
		s.logf("started %s (pid %d, log: %s)", c.name, p.cmd.Process.Pid, s.path("logs", c.name+".log"))
	}
	return nil
}

// backendsConfig is the manager's --backends-config: the user's file (Config.BackendsConfig),
// or one the stack writes that routes every capability to the reference worker, whose token
// is in the file workerToken.
func (s *Stack) backendsConfig(workerToken string) (string, error) {
	if s.cfg.BackendsConfig != "" {
		return s.cfg.BackendsConfig, nil
	}
	backends := s.path("backends.yaml")
	config := fmt.Sprintf(`# Written by the local stack: every capability runs on the reference worker.
# To route some elsewhere, give videogen-local --backends-config=FILE (a copy of this one, edited).
backends:
- name: reference-worker
  capabilities: [video.short, video.eraser, video.template, image.pose]
  http:
    url: %s
    tokenFile: %q
`, s.WorkerURL, workerToken)
	return backends, os.WriteFile(backends, []byte(config), 0o644)
}

// wiring is what the stack's own flags point the components at: files and the ledger's address.
type wiring struct{ workerToken, backends, eventTokens, ledgerToken, ledgerAddr string }

// command is one component's command line: the flags that wire the stack together, then the
// user's (Config.ManagerArgs, Config.APIArgs).
type command struct {
	name       string
	own, extra []string
}

func (c command) args() []string { return append(slices.Clip(c.own), c.extra...) }

// commands are the components' command lines, in start order: worker, manager, apiservers.
func (s *Stack) commands(w wiring) []command {
	loopback := "--allow-private-urls=127.0.0.0/8,::1/128"
	var deadlines []string
	if t := s.cfg.Timeouts; t != (httpserver.Timeouts{}) {
		deadlines = []string{"--read-header-timeout=" + t.ReadHeader.String(), "--read-timeout=" + t.Read.String()}
	}
	var price []string
	if s.cfg.DefaultPrice != nil {
		price = []string{fmt.Sprintf("--default-price=%d", *s.cfg.DefaultPrice)}
	}
	cmds := []command{
		{name: "worker", own: append([]string{"--bind-address=" + s.cfg.WorkerAddress, "--public-url=" + s.WorkerURL,
			"--blob-dir=" + s.path("worker-blobs"), "--token-file=" + w.workerToken, loopback}, deadlines...)},
		{name: "manager", own: append([]string{"--metrics-bind-address=" + orZero(s.cfg.ManagerMetricsAddress), "--metrics-secure=false",
			"--health-probe-bind-address=127.0.0.1:0",
			"--backends-config=" + w.backends, "--backend-poll-interval=500ms", loopback,
			"--ledger-bind-address=" + w.ledgerAddr, "--webhook-secret-namespace=" + SystemNamespace}, price...), extra: s.cfg.ManagerArgs},
	}
	for i, url := range s.APIURLs {
		name, blobs, metrics := "apiserver", s.path("api-blobs"), orZero(s.cfg.APIMetricsAddress)
		if i > 0 {
			name, blobs, metrics = fmt.Sprintf("apiserver-%d", i+1), s.path(fmt.Sprintf("api-blobs-%d", i+1)), "0"
		}
		cmds = append(cmds, command{name: name, own: append([]string{"--bind-address=" + strings.TrimPrefix(url, "http://"),
			"--metrics-bind-address=" + metrics, "--health-probe-bind-address=127.0.0.1:0", "--blob-dir=" + blobs,
			"--public-url=" + url, "--event-service-tokens-file=" + w.eventTokens, loopback,
			"--ledger-url=http://" + w.ledgerAddr, "--ledger-token-file=" + w.ledgerToken,
			// Nothing routes here but the address itself: Ctrl-C need not wait out a drain.
			"--shutdown-delay=0"}, slices.Concat(deadlines, price)...), extra: s.cfg.APIArgs})
	}
	return cmds
}

// orZero is a metrics bind address: "0" (none) when addr is empty.
func orZero(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// checkProcesses reports a component that exited, with the end of its log.
func (s *Stack) checkProcesses() error {
	for _, p := range s.procs {
		if p.exited() {
			tail, _ := os.ReadFile(s.path("logs", p.name+".log"))
			if len(tail) > 2000 {
				tail = tail[len(tail)-2000:]
			}
			return fmt.Errorf("%s exited (%s); end of its log:\n%s", p.name, p.exit(), tail)
		}
	}
	return nil
}

// Wait blocks until ctx ends or a component exits on its own.
func (s *Stack) Wait(ctx context.Context) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := s.checkProcesses(); err != nil {
				return err
			}
		}
	}
}

// secretFile makes (once) a file in the data directory holding a random token with prefix,
// kept like the demo key so a second run reuses it, and stores the token in *token. The
// worker's bearer token and the EventService.Handle service token are made this way.
func (s *Stack) secretFile(name, prefix string, token *string) (path string, err error) {
	path = s.path(name)
	if raw, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(raw)); tok != "" {
			*token = tok
			return path, nil
		}
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	*token = prefix + hex.EncodeToString(b[:])
	return path, os.WriteFile(path, []byte(*token+"\n"), 0o600)
}
