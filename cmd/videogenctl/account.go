package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func newAccountCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Create accounts and show their points"}
	var description string
	create := &cobra.Command{
		Use:   "create NAME [--description TEXT]",
		Short: "Create an account: its namespace (if missing) and its PointAccount, with 0 points",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return accountCreate(cmd.Context(), o, args[0], description)
		},
	}
	create.Flags().StringVar(&description, "description", "", "whose account this is")
	show := &cobra.Command{
		Use:               "show NAME",
		Short:             "Show an account's points, holds and newest top-ups",
		Args:              exactArgs(1),
		ValidArgsFunction: firstArg(o.completeAccounts),
		RunE: func(cmd *cobra.Command, args []string) error {
			return accountShow(cmd.Context(), o, args[0])
		},
	}
	cmd.AddCommand(create, show)
	return cmd
}

// firstArg completes the first positional argument with complete, and nothing after it.
func firstArg(complete cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// accountCreate makes the namespace (if missing) and its PointAccount.
func accountCreate(ctx context.Context, o *options, name, description string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"videogen.dev/account": "true"}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %q: %w", name, err)
	}
	acct := &videogenv1alpha1.PointAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: videogenv1alpha1.PointAccountName},
		Spec:       videogenv1alpha1.PointAccountSpec{Description: description},
	}
	if err := c.Create(ctx, acct); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("account %q already exists", name)
		}
		return fmt.Errorf("creating the PointAccount: %w", err)
	}
	fmt.Fprintf(o.out, "account %q created with 0 points; top it up with: %s topup %s AMOUNT --reference REF\n", name, displayName(), name)
	return nil
}

// accountView is what `account show` prints.
type accountView struct {
	Account  string     `json:"account"`
	Balance  int64      `json:"balance"`
	Frozen   int64      `json:"frozen"`
	Reserved int64      `json:"reserved"`
	Spent    int64      `json:"spent"`
	Credited int64      `json:"credited"`
	Ready    string     `json:"ready"`
	Holds    []holdView `json:"holds"`
	// Reservations are blocks of points REST apiserver replicas hold to admit tasks (part of
	// frozen); one that nobody renews returns to the balance after the manager's TTL.
	Reservations []reservationView `json:"reservations"`
	RecentTop    []topUpView       `json:"recentTopUps"`
	// OlderTopUps counts the top-ups beyond the recentTopUps newest.
	OlderTopUps int `json:"olderTopUps"`
}

// recentTopUps is how many top-ups `account show` lists.
const recentTopUps = 10

type reservationView struct {
	Name      string    `json:"name"`
	Points    int64     `json:"points"`
	RenewedAt time.Time `json:"renewedAt"`
}

// holdView is one hold with what its task says about it ("missing": no such task, so the
// manager refunds the hold after its grace period).
type holdView struct {
	Task      string     `json:"task"`
	Points    int64      `json:"points"`
	TaskPhase string     `json:"taskPhase"`
	Since     *time.Time `json:"since,omitempty"`
}

type topUpView struct {
	Name         string     `json:"name"`
	Amount       int64      `json:"amount"`
	Reference    string     `json:"reference"`
	AppliedAt    *time.Time `json:"appliedAt,omitempty"`
	BalanceAfter *int64     `json:"balanceAfter,omitempty"`
}

func accountShow(ctx context.Context, o *options, name string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	acct := &videogenv1alpha1.PointAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: name, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no account %q", name)
		}
		return err
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace(name)); err != nil {
		return err
	}
	v := accountView{Account: name, Balance: acct.Status.Balance, Frozen: acct.Status.Frozen, Reserved: acct.Status.Reserved,
		Spent: acct.Status.Spent, Credited: acct.Status.Credited, Ready: "Unknown", Holds: []holdView{}, Reservations: []reservationView{}}
	for _, r := range acct.Status.Reservations {
		v.Reservations = append(v.Reservations, reservationView{Name: r.Name, Points: r.Amount, RenewedAt: r.RenewedAt.Time})
	}
	if len(acct.Status.Holds) > 0 {
		var tasks videogenv1alpha1.VideoTaskList
		if err := c.List(ctx, &tasks, client.InNamespace(name)); err != nil {
			return err
		}
		byName := map[string]*videogenv1alpha1.VideoTask{}
		for i := range tasks.Items {
			byName[tasks.Items[i].Name] = &tasks.Items[i]
		}
		holds := acct.Status.HoldsByTask()
		for _, task := range slices.Sorted(maps.Keys(holds)) {
			h := holdView{Task: task, Points: holds[task], TaskPhase: "missing"}
			if t := byName[task]; t != nil {
				created := t.CreationTimestamp.Time
				h.TaskPhase, h.Since = string(t.Status.Phase), &created
				if h.TaskPhase == "" {
					h.TaskPhase = "Pending"
				}
			}
			v.Holds = append(v.Holds, h)
		}
	}
	if cond := meta.FindStatusCondition(acct.Status.Conditions, videogenv1alpha1.ConditionReady); cond != nil {
		v.Ready = fmt.Sprintf("%s (%s)", cond.Status, cond.Reason)
	}
	// Newest first, and only the latest few: an account topped up monthly for years would
	// otherwise bury its balance under its history (kubectl get pointtopups has it all).
	sort.SliceStable(topUps.Items, func(i, j int) bool {
		a, b := topUps.Items[i].CreationTimestamp, topUps.Items[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return topUps.Items[i].Name > topUps.Items[j].Name
	})
	v.OlderTopUps = max(len(topUps.Items)-recentTopUps, 0)
	for _, t := range topUps.Items[:len(topUps.Items)-v.OlderTopUps] {
		tv := topUpView{Name: t.Name, Amount: t.Spec.Amount, Reference: t.Spec.Reference, BalanceAfter: t.Status.BalanceAfter}
		if t.Status.AppliedAt != nil {
			at := t.Status.AppliedAt.Time
			tv.AppliedAt = &at
		}
		v.RecentTop = append(v.RecentTop, tv)
	}
	return o.print(v, v.table)
}

// table prints the account's balances, then one section per kind of record: add a section for
// a new kind of record here and a field for it in accountView.
func (v accountView) table(w io.Writer) {
	fmt.Fprintf(w, "ACCOUNT\tBALANCE\tFROZEN\tRESERVED\tSPENT\tCREDITED\tREADY\n%s\t%d\t%d\t%d\t%d\t%d\t%s\n",
		v.Account, v.Balance, v.Frozen, v.Reserved, v.Spent, v.Credited, v.Ready)
	for _, section := range []func(io.Writer){v.reservationsTable, v.holdsTable, v.topUpsTable} {
		section(w)
	}
}

func (v accountView) reservationsTable(w io.Writer) {
	if len(v.Reservations) == 0 {
		return
	}
	fmt.Fprintf(w, "\nRESERVATION\tPOINTS\tRENEWED\n")
	for _, r := range v.Reservations {
		fmt.Fprintf(w, "%s\t%d\t%s\n", r.Name, r.Points, r.RenewedAt.Format(time.RFC3339))
	}
}

func (v accountView) holdsTable(w io.Writer) {
	if len(v.Holds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHOLD (TASK)\tPOINTS\tTASK PHASE\tSINCE\n")
	for _, h := range v.Holds {
		since := "-"
		if h.Since != nil {
			since = h.Since.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", h.Task, h.Points, h.TaskPhase, since)
	}
}

func (v accountView) topUpsTable(w io.Writer) {
	if len(v.RecentTop) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTOP-UP\tAMOUNT\tREFERENCE\tAPPLIED\n")
	for _, t := range v.RecentTop {
		applied := "pending"
		if t.AppliedAt != nil {
			applied = t.AppliedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", t.Name, t.Amount, t.Reference, applied)
	}
	if v.OlderTopUps > 0 {
		fmt.Fprintf(w, "(%d older: kubectl get pointtopups -n %s)\n", v.OlderTopUps, v.Account)
	}
}
