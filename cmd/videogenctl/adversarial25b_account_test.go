package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// account create whose PointAccount landed but answered an error says it is created. 1.
// `videogenctl account create acme` POSTs the PointAccount. 2. The kube-apiserver stores it
// and answers 504 (or the connection drops). Before the fix the CLI said "creating the
// PointAccount: Timeout: …", exit status 1; the retry said `account "acme" already exists`,
// exit status 1, and nothing more: an onboarding script fails twice for an account that is
// there, and a person wonders whose it is. Now the account, which was not there before the
// create, is looked up after an error the cluster did not refuse it with: there, with the
// description asked for, it is the one created (whoever's request made it, it is the account
// asked for); an account that exists already is an error still (account create is no apply:
// two people onboarding one customer learn of each other), saying when it was created, its
// balance and how to see it; and a create that did not land says it may have been created.
func TestAdversarial25bAccountCreateWhoseCreateLandedButFailedSaysCreated(t *testing.T) {
	env, ctx, _ := startControlPlane(t)
	stderr = io.Discard
	t.Cleanup(func() { stderr = os.Stderr })
	var forward atomic.Bool
	flags := landsThen504(t, env, "/pointaccounts", &forward)
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, flags...), &out)
		return out.String(), err
	}
	forward.Store(true)
	if out, err := cli("account", "create", "acme", "--description", "ACME Corp"); err != nil || !strings.Contains(out, `account "acme" created with 0 points`) {
		t.Errorf("account create whose create landed but answered 504: %v\n%s; want it said to be created", err, out)
	}
	if _, err := cli("account", "create", "acme", "--description", "ACME Corp"); err == nil ||
		!strings.Contains(err.Error(), `account "acme" already exists`) || !strings.Contains(err.Error(), "account show acme") {
		t.Errorf("account create of an account there: %v; want it said to exist, and how to see it", err)
	}
	forward.Store(false)
	if _, err := cli("account", "create", "globex"); err == nil || !strings.Contains(err.Error(), "may have been created all the same") {
		t.Errorf("account create whose create answered 504 and is not there: %v; want it said that it may have been created, and how to check", err)
	}
}
