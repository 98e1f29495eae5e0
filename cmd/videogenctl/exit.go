package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
)

// exitWatchFailed is the exit status of `task watch NAME` when it could not follow the task
// (the cluster unreachable, no such task), and of `task watch` on any error: as `kubectl diff`,
// 1 is the answer (the task did not succeed) and more than 1 is an error, so a script can tell
// the two apart.
const exitWatchFailed = 2

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process's exit status for err.
func exitCode(err error) int {
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	return 1
}

// explainConnection says in kubectl's words that the cluster could not be reached, instead of
// client-go's "failed to get server groups: Get …: dial tcp …" chain.
func explainConnection(err error) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	host := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
		host = u.Host
	}
	var why string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "was refused"
	case ue.Timeout():
		why = "timed out (--request-timeout waits longer)"
	default:
		if _, isNet := errors.AsType[*net.OpError](err); !isNet {
			if _, isDNS := errors.AsType[*net.DNSError](err); !isDNS {
				return err
			}
		}
		why = "failed"
	}
	return &exitError{code: exitCode(err), err: fmt.Errorf("the connection to the server %s %s: is the cluster up, and are --kubeconfig, --context and --server right? (%w)", host, why, err)}
}
