package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

func newAPIKeyCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "apikey", Short: "Issue, list and revoke API keys of the REST API"}
	var account, description string
	create := &cobra.Command{
		Use:   "create --account NAME [--description TEXT]",
		Short: "Issue an API key for an account (--account, or -n); the key is shown once",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked before the key is issued: its secret is shown only once.
			if err := o.checkViewFormat(); err != nil {
				return err
			}
			ns, err := listNamespace(o, account)
			if err != nil {
				return err
			}
			if ns == "" {
				return fmt.Errorf("usage: %s apikey create --account NAME [--description TEXT]", displayName())
			}
			return apiKeyCreate(cmd.Context(), o, ns, description)
		},
	}
	create.Flags().StringVar(&account, "account", "", "account (namespace) the key acts for, like -n")
	create.Flags().StringVar(&description, "description", "", "what the key is for")
	_ = create.RegisterFlagCompletionFunc("account", o.completeAccounts)
	var only string
	list := &cobra.Command{
		Use:   "list [--account NAME]",
		Short: "List API keys, newest first (never the keys themselves), of one account (--account, or -n) or of all",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// -n limits the list as it does task list's: a key of another account shown
			// under "apikey list -n acme" is one an administrator may revoke by mistake.
			ns, err := listNamespace(o, only)
			if err != nil {
				return err
			}
			return apiKeyList(cmd.Context(), o, ns)
		},
	}
	list.Flags().StringVar(&only, "account", "", "only this account's keys, like -n (default: all accounts)")
	_ = list.RegisterFlagCompletionFunc("account", o.completeAccounts)
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an API key (its ID, as apikey list shows, or the key itself); requests with it are refused within seconds",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkViewFormat(); err != nil {
				return err
			}
			return apiKeyRevoke(cmd.Context(), o, args[0])
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func apiKeyCreate(ctx context.Context, o *options, account, description string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	// A key for an account that does not exist could only ever answer errors.
	acct, err := requireAccount(ctx, c, account)
	if err != nil {
		return err
	}
	if !acct.DeletionTimestamp.IsZero() {
		return closingError(account, "a key for it would have every task refused")
	}
	// Nor for a namespace being deleted: Kubernetes makes nothing in it (every task the key
	// submits is refused, 403 create_refused), and the key stops working when it goes.
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: account}, &ns); err == nil && !ns.DeletionTimestamp.IsZero() {
		return fmt.Errorf("namespace %q is being deleted: a key for it would have every task refused, and stop working once the namespace is gone; nothing created", account)
	}
	key, info, err := apikeys.Issue(ctx, c, o.keyNamespace, account, description)
	if err != nil {
		if info, err = keyStoredAllTheSame(ctx, o, c, account, key, info, err); err != nil {
			return err
		}
	}
	view := map[string]string{"id": info.ID, "account": account, "key": key}
	return o.print(view, func(w io.Writer) {
		fmt.Fprintf(w, "API key %s for account %q (shown once; store it now):\n\n  %s\n\nRevoke with: %s apikey revoke %s\n",
			info.ID, account, key, displayName(), info.ID)
	})
}

// keyStoredAllTheSame is the Key of key, whose Secret's create failed with err, when it was
// stored all the same: a write that lands but answers an error (the kube-apiserver's 504
// "request did not complete within requested timeout", a connection dropped after the request
// was sent). That key works, and only this command has it: it is shown as issued, or it would
// be a working key nobody holds. Otherwise the error, saying whether the key may have been
// stored, and then its id (never the key: an error goes to logs) to revoke it by.
func keyStoredAllTheSame(ctx context.Context, o *options, c client.Reader, account, key string, info apikeys.Key, err error) (apikeys.Key, error) {
	if key == "" || refusedForSure(err) {
		return apikeys.Key{}, err
	}
	readCtx, cancel := context.WithTimeout(ctx, topUpRead)
	defer cancel()
	if stored, found, gerr := apikeys.Stored(readCtx, c, o.keyNamespace, key); gerr == nil && found {
		return stored, nil
	}
	return apikeys.Key{}, fmt.Errorf("%w; the cluster did not say that it refused it, so API key %s may have been stored all the same, and nobody holds it: "+
		"if %s apikey list --account %s shows it, revoke it (%s apikey revoke %s) before you create another",
		err, info.ID, displayName(), account, displayName(), info.ID)
}

func apiKeyList(ctx context.Context, o *options, account string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	keys, err := apikeys.List(ctx, c, o.keyNamespace, account)
	if err != nil {
		return err
	}
	newestKeysFirst(keys)
	if len(keys) == 0 && (o.output == "" || o.output == "table") {
		// As task list's note, on stderr: no such account (a typo, most likely), or where it
		// looked, for an operator installed elsewhere.
		of := ""
		if account != "" {
			if has, known := hasAccount(ctx, c, account); known && !has {
				fmt.Fprintf(stderr, "No API keys found: there is no account %q.\n", account)
				return nil
			}
			of = fmt.Sprintf(" of account %q", account)
		}
		fmt.Fprintf(stderr, "No API keys%s found in namespace %q; if the operator runs in another namespace, name it with --key-namespace.\n", of, o.keyNamespace)
		return nil
	}
	views := keyViews(ctx, c, keys)
	return o.print(views, func(w io.Writer) { keysTable(w, views) })
}

// keyView is a key as apikey list prints it: with AccountClosed, why a key that still works
// is one to revoke.
type keyView struct {
	apikeys.Key
	// AccountClosed says that the key's namespace has no account (closed: its PointAccount
	// deleted), or one being closed, while the namespace stays: the key still reads the tasks
	// and their results, makes and changes short templates and reads and rotates the webhook
	// signing secret, and acts for an account made later in the namespace, whoever it is for.
	// Closing an account revokes its keys (docs/ledger.md, "Deleting things"): this names those
	// it left (issued while it closed, or closed by a manager that did not revoke them) and
	// those it will revoke. Empty for an orphaned key (its namespace gone, it no longer works)
	// and when the account could not be read.
	AccountClosed string `json:"accountClosed,omitempty"`
	// closing: the account is being closed, and its close revokes the key.
	closing bool
}

// keyViews reads the account of each key whose namespace is still its own, once per account.
func keyViews(ctx context.Context, c client.Reader, keys []apikeys.Key) []keyView {
	type state struct {
		note    string
		closing bool
	}
	accounts := map[string]state{}
	views := make([]keyView, len(keys))
	for i, k := range keys {
		views[i].Key = k
		if k.Orphaned != "" || k.Account == "" {
			continue
		}
		st, read := accounts[k.Account]
		if !read {
			switch acct, err := getAccount(ctx, c, k.Account); {
			case apierrors.IsNotFound(err):
				st.note = fmt.Sprintf("account %q is closed (no PointAccount) while its namespace stays: the key still reads its tasks and results and changes its short templates; revoke it", k.Account)
			case err == nil && !acct.DeletionTimestamp.IsZero():
				st = state{closing: true, note: fmt.Sprintf("account %q is being closed: the key reads its tasks and results until it closes, which revokes the key", k.Account)}
			}
			accounts[k.Account] = st
		}
		views[i].AccountClosed, views[i].closing = st.note, st.closing
	}
	return views
}

// newestKeysFirst orders keys newest first, as task list and account show's top-ups: the
// kube-apiserver lists them by Secret name, that is by their random ids, an order that means
// nothing. It keeps creationTimestamp to the second: the keys of one second by the millisecond
// they were issued in (apikeys.AnnotationIssuedAt, the issuer's clock, which only orders keys
// the kube-apiserver's clock put in one second), then by id, descending, so that the order is
// total (a key issued before the annotation was written comes after those of its second that
// have it).
func newestKeysFirst(keys []apikeys.Key) {
	slices.SortFunc(keys, func(a, b apikeys.Key) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		if c := b.IssuedAt.Compare(a.IssuedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// keysTable is apikey list's table. A description is whatever the Secret's annotation says,
// which anyone who may edit Secrets in the operator's namespace writes: escaped. STATUS marks
// a key whose namespace is gone (apikeys.Key.Orphaned, which -o json prints whole): it no
// longer works, and is listed until the manager deletes it (at once while one runs) or it is
// revoked; and one whose account is closed or closing in a namespace that stays
// (keyView.AccountClosed), which still works and is left to revoke.
func keysTable(w io.Writer, keys []keyView) {
	fmt.Fprintln(w, "ID\tACCOUNT\tCREATED\tSTATUS\tDESCRIPTION")
	for _, k := range keys {
		status := "active"
		switch {
		case k.Orphaned != "":
			status = "namespace gone: revoke it"
		case k.closing:
			status = "account closing: revoked at its close"
		case k.AccountClosed != "":
			status = "account closed: revoke it"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Account, k.CreatedAt.Format(time.RFC3339), status, terminalSafe(k.Description))
	}
}

// keyOfNamedAccount refuses to revoke a key of another account than -n names, when it names
// one: apikey list -n limits the keys to that account, and a revoke under -n acme that revoked
// globex's key would stop another customer's requests. Without -n any key is revoked.
func keyOfNamedAccount(ctx context.Context, o *options, c client.Reader, given string) error {
	ns, explicit, err := o.namespace()
	id, ok := apikeys.IDOf(given)
	if err != nil || !explicit || !ok {
		return err // not an id: Revoke says so
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.keyNamespace, Name: apikeys.SecretName(id)}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // Revoke says so
		}
		return err
	}
	if account := s.Labels[apikeys.LabelAccount]; account != ns {
		return fmt.Errorf("API key %s is account %q's, not %q's (-n): nothing revoked; revoke it without -n, or with -n %s", id, account, ns, account)
	}
	return nil
}

// keyThere reads the Secret of key id (as IDOf reads it): nil when it is there and not being
// deleted, a NotFound error when it is not (gone, or being deleted: revoked), or why it could not
// be read (not an id, a failed read).
func keyThere(ctx context.Context, o *options, c client.Reader, given string) error {
	id, ok := apikeys.IDOf(given)
	if !ok {
		return fmt.Errorf("not an API key id")
	}
	readCtx, cancel := context.WithTimeout(ctx, topUpRead)
	defer cancel()
	var s corev1.Secret
	if err := c.Get(readCtx, client.ObjectKey{Namespace: o.keyNamespace, Name: apikeys.SecretName(id)}, &s); err != nil {
		return err
	}
	if !s.DeletionTimestamp.IsZero() {
		return apierrors.NewNotFound(corev1.Resource("secrets"), s.Name)
	}
	return nil
}

func apiKeyRevoke(ctx context.Context, o *options, id string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	if err := keyOfNamedAccount(ctx, o, c, id); err != nil {
		return err
	}
	// Read before the delete, so that a key gone after a delete that answered an error is
	// known to be revoked, not a typo.
	existed := keyThere(ctx, o, c, id) == nil
	if err := apikeys.Revoke(ctx, c, o.keyNamespace, id); err != nil {
		if errors.Is(err, apikeys.ErrUnknownKey) {
			return fmt.Errorf("%w; if the operator runs in another namespace, name it with --key-namespace", err)
		}
		// A delete can land and answer an error (the kube-apiserver's 504 "request did not
		// complete within requested timeout", a connection dropped after the request was
		// sent): a key that was there and is gone (or being deleted) now is revoked.
		if _, isID := apikeys.IDOf(id); !isID || refusedForSure(err) || !existed || !apierrors.IsNotFound(keyThere(ctx, o, c, id)) {
			if isID && !refusedForSure(err) {
				err = fmt.Errorf("%w; the key may not be revoked, and may still work: %s apikey list shows it if it does; revoke it again", err, displayName())
			}
			return err
		}
	}
	id, _ = apikeys.IDOf(id) // revoked: its id, also when given the key itself
	return o.print(map[string]any{"id": id, "revoked": true}, func(w io.Writer) {
		fmt.Fprintf(w, "API key %s revoked; requests with it are refused within seconds\n", id)
	})
}
