package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
)

// closeOptions are account close's flags.
type closeOptions struct {
	reference, note string
	cancelTasks     bool
	timeout         time.Duration
}

func newAccountCloseCommand(o *options) *cobra.Command {
	var f closeOptions
	cmd := &cobra.Command{
		Use:   "close NAME [--reference REF] [--cancel-tasks]",
		Short: "Close an account: suspend it, end its tasks, debit what is left and delete it",
		Long: `Closes an account in the order docs/ledger.md gives, so that no step is forgotten:
suspends it (it takes no new tasks), cancels its unfinished tasks with --cancel-tasks (without
it, stops there while tasks run: they end charged or refunded, then run it again), waits until
no task holds points, debits the balance left (a PointTopUp with --reference, the paperwork of
the refund or write-off, and --note), deletes the PointAccount and waits until the operator
closed it, which revokes its API keys. Run again after an interruption, it goes on from where
the account is. The namespace stays, with the tasks, their results, the top-ups (the audit
trail) and the webhook signing Secret; for a customer that leaves, export them and delete the
namespace (docs/ledger.md, Deleting things).`,
		Args:              exactArgs(1),
		ValidArgsFunction: firstArg(o.completeAccounts),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTopUpText(f.reference, f.note); err != nil {
				return err
			}
			if err := o.checkViewFormat(); err != nil {
				return err
			}
			name, err := listNamespace(o, args[0])
			if err != nil {
				return err
			}
			return accountClose(cmd.Context(), o, name, f)
		},
	}
	cmd.Flags().StringVar(&f.reference, "reference", "", "paperwork reference of the debit of what is left (required while the account has points available or held)")
	cmd.Flags().StringVar(&f.note, "note", "account closed", "why, for the debit's audit trail")
	cmd.Flags().BoolVar(&f.cancelTasks, "cancel-tasks", false, "cancel the account's unfinished tasks (refunded, unless one finishes first)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the tasks to end and for the operator to close the account")
	return cmd
}

// closedView is what account close prints.
type closedView struct {
	Account string `json:"account"`
	// Debited is the balance the close debited (0: none was left), by DebitTopUp.
	Debited    int64  `json:"debited"`
	DebitTopUp string `json:"debitTopUp,omitempty"`
	// CanceledTasks are the tasks the close asked to cancel.
	CanceledTasks []string `json:"canceledTasks,omitempty"`
	// KeysLeft are API keys of the namespace the close did not revoke (issued as it closed).
	KeysLeft []string `json:"keysLeft,omitempty"`
}

// accountClose runs the steps of a close, each only if the account still needs it.
func accountClose(ctx context.Context, o *options, name string, f closeOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	acct, err := getAccount(ctx, c, name)
	if apierrors.IsNotFound(err) {
		return noAccountError(ctx, c, name)
	}
	if err != nil {
		return err
	}
	// Asked for before anything changes: the points there are now, or held by tasks (a
	// canceled one refunds), are debited at the end, and a close that suspended the account to
	// stop only there would have done half of it for a missing flag.
	if st := acct.Status; (st.Balance > 0 || st.Frozen > 0) && strings.TrimSpace(f.reference) == "" {
		return fmt.Errorf("account %q has %d points available and %d held, which the close debits once its tasks end: pass --reference REF (the refund's or write-off's paperwork); nothing changed",
			name, st.Balance, st.Frozen)
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	view := closedView{Account: name}
	if acct.DeletionTimestamp.IsZero() && !acct.Spec.Suspended {
		// First, so that the tasks and the balance below stop changing but for their ends.
		patch := []byte(`{"spec":{"suspended":true}}`)
		if err := c.Patch(ctx, acct, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return fmt.Errorf("suspending account %q: %w", name, err)
		}
		fmt.Fprintf(stderr, "suspended account %s: it takes no new tasks\n", name)
	}
	open, err := unfinishedTasks(ctx, c, name)
	if err != nil {
		return err
	}
	if len(open) > 0 && !f.cancelTasks {
		return fmt.Errorf("account %q is suspended and has %d unfinished task(s) (%s task list -n %s): let them end and run account close again, or run it with --cancel-tasks",
			name, len(open), displayName(), name)
	}
	for i := range open {
		// One that ended or went meanwhile needs no cancel.
		if _, err := requestCancel(ctx, c, &open[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		view.CanceledTasks = append(view.CanceledTasks, open[i].Name)
	}
	if len(open) > 0 {
		fmt.Fprintf(stderr, "asked %d task(s) to cancel; waiting until none holds points\n", len(open))
	}
	if acct, err = waitUntilNothingHeld(ctx, c, name); err != nil {
		return err
	}
	if acct != nil && acct.Status.Balance > 0 {
		balance := acct.Status.Balance
		if strings.TrimSpace(f.reference) == "" {
			return fmt.Errorf("account %q has %d points left, which the close debits: pass --reference REF (the refund's or write-off's paperwork)", name, balance)
		}
		t, err := createTopUp(ctx, c, name, -balance, f.reference, f.note)
		if err != nil {
			return err
		}
		if err := waitApplied(ctx, c, t, acct); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "debited %d points (top-up %s, reference %s)\n", balance, t.Name, f.reference)
		view.Debited, view.DebitTopUp = balance, t.Name
		// The account's status shows the debit once the top-up's does (the ledger writes it into
		// the account's journal first); more points there are a credit applied meanwhile,
		// which the delete would be refused for.
		if acct, err = waitUntilNothingHeld(ctx, c, name); err != nil {
			return err
		}
		if acct != nil && acct.Status.Balance > 0 {
			return fmt.Errorf("account %q has %d points again after the debit: a credit was applied meanwhile; run account close again, with another --reference, to debit it",
				name, acct.Status.Balance)
		}
	}
	if acct != nil {
		if err := deleteEmptyAccount(ctx, c, acct); err != nil {
			return err
		}
	}
	keys, err := apikeys.List(ctx, c, o.keyNamespace, name)
	if err != nil {
		return err
	}
	for _, k := range keys {
		view.KeysLeft = append(view.KeysLeft, k.ID)
	}
	return o.print(view, func(w io.Writer) { view.table(w) })
}

func (v closedView) table(w io.Writer) {
	fmt.Fprintf(w, "account %s closed", v.Account)
	if v.Debited > 0 {
		fmt.Fprintf(w, ": %d points debited (top-up %s)", v.Debited, v.DebitTopUp)
	}
	fmt.Fprintln(w, "; its API keys are revoked")
	if len(v.KeysLeft) > 0 {
		fmt.Fprintf(w, "API keys issued as it closed still work: revoke them (%s apikey revoke %s)\n", displayName(), strings.Join(v.KeysLeft, ", "))
	}
	fmt.Fprintf(w, "The namespace %s keeps its tasks and their results, its top-ups and its webhook signing Secret; "+
		"for a customer that leaves, export them and delete the namespace (docs/ledger.md, Deleting things)\n", v.Account)
}

// unfinishedTasks are the tasks of account that have not ended.
func unfinishedTasks(ctx context.Context, c client.Reader, account string) ([]videogenv1alpha1.VideoTask, error) {
	var list videogenv1alpha1.VideoTaskList
	if err := c.List(ctx, &list, client.InNamespace(account)); err != nil {
		return nil, fmt.Errorf("listing the tasks of account %q: %w", account, err)
	}
	var open []videogenv1alpha1.VideoTask
	for _, t := range list.Items {
		if !t.Status.Phase.Terminal() {
			open = append(open, t)
		}
	}
	return open, nil
}

// waitUntilNothingHeld waits until account's tasks have ended and its status shows nothing
// frozen or held, as the admission policy that guards its delete reads it, and returns it; nil
// when it is gone (a close run before, interrupted after the delete, has ended).
func waitUntilNothingHeld(ctx context.Context, c client.Reader, account string) (*videogenv1alpha1.PointAccount, error) {
	var acct *videogenv1alpha1.PointAccount
	var open int
	gone := false
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		tasks, err := unfinishedTasks(ctx, c, account)
		if err != nil {
			return false, nil // read again: one failed read is no reason to stop a close midway
		}
		got, err := getAccount(ctx, c, account)
		switch {
		case apierrors.IsNotFound(err):
			gone = true
			return true, nil
		case err != nil:
			return false, nil
		}
		acct, open = got, len(tasks)
		st := acct.Status
		return open == 0 && st.Holds == 0 && st.Frozen == 0, nil
	})
	if gone {
		return nil, nil
	}
	if err != nil {
		if acct == nil {
			return nil, fmt.Errorf("reading account %q: %w", account, err)
		}
		return nil, fmt.Errorf("account %q still has %d unfinished task(s) and %d points frozen (%s task list -n %s): run account close again once they end",
			account, open, acct.Status.Frozen, displayName(), account)
	}
	return acct, nil
}

// deleteEmptyAccount deletes acct, the copy read (a PointAccount made again meanwhile is
// another account), and waits until the operator has closed it: its finalizer goes once the
// ledger's books show it empty and its API keys are revoked.
func deleteEmptyAccount(ctx context.Context, c client.Client, acct *videogenv1alpha1.PointAccount) error {
	if acct.DeletionTimestamp.IsZero() {
		if err := c.Delete(ctx, acct, client.Preconditions{UID: &acct.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting account %q: %w", acct.Namespace, err)
		}
	}
	key := client.ObjectKeyFromObject(acct)
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got := &videogenv1alpha1.PointAccount{}
		switch err := c.Get(ctx, key, got); {
		case apierrors.IsNotFound(err):
			return true, nil
		case err == nil && got.UID != acct.UID:
			return true, nil // closed, and another made since
		case err == nil:
			acct = got
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	why := "is the operator running?"
	if cond := meta.FindStatusCondition(acct.Status.Conditions, videogenv1alpha1.ConditionReady); cond != nil && cond.Reason == videogenv1alpha1.ReasonClosing {
		why = cond.Message
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return fmt.Errorf("interrupted: account %q is deleted and goes once it is empty (%s); run account close again to see it through", acct.Namespace, why)
	}
	return fmt.Errorf("account %q is deleted but not closed yet: %s", acct.Namespace, why)
}
