package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/internal/accountns"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/webhooksecrets"
)

func newAccountCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "account", Short: "Create, show and close accounts"}
	var description string
	create := &cobra.Command{
		Use:   "create NAME [--description TEXT]",
		Short: "Create an account: its namespace (if missing) and its PointAccount, with 0 points",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkViewFormat(); err != nil {
				return err
			}
			// -n naming another account is refused, as for account show.
			name, err := listNamespace(o, args[0])
			if err != nil {
				return err
			}
			return accountCreate(cmd.Context(), o, name, description)
		},
	}
	create.Flags().StringVar(&description, "description", "", "whose account this is")
	show := &cobra.Command{
		Use:               "show NAME",
		Short:             "Show an account's points, holds and newest top-ups (NAME, or -n NAME)",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: firstArg(o.completeAccounts),
		RunE: func(cmd *cobra.Command, args []string) error {
			// -n names the account as it does for the task and apikey commands.
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			name, err := listNamespace(o, name)
			if err != nil {
				return err
			}
			if name == "" {
				return fmt.Errorf("usage: %s", cmd.UseLine())
			}
			return accountShow(cmd.Context(), o, name)
		},
	}
	cmd.AddCommand(create, show, newAccountCloseCommand(o))
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
	if err := accountNamespaceAllowed(o, name); err != nil {
		return err
	}
	// Checked before the namespace is made: the PointAccount's refusal of it came after, and
	// left the namespace of a command that failed.
	if n := utf8.RuneCountInString(description); n > maxDescription {
		return fmt.Errorf("--description is %d characters long; an account's is at most %d", n, maxDescription)
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	if what := operatorsNamespace(ctx, c, name); what != "" {
		return fmt.Errorf("%q cannot be an account: it is the operator's namespace (it holds %s), where the API key Secrets are; "+
			"give the account a namespace of its own, and name the operator's with --key-namespace %s", name, what, name)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"videogen.dev/account": "true"}}}
	nsExisted := false
	if err := c.Create(ctx, ns); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %q: %w", name, err)
		}
		nsExisted = true
	}
	// Read first, so that an account found after a create that answered an error is known to
	// be the one created (it was not there before).
	if existing, err := getAccount(ctx, c, name); err == nil {
		return accountExists(existing)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the PointAccount: %w", err)
	}
	acct := &videogenv1alpha1.PointAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: videogenv1alpha1.PointAccountName},
		Spec:       videogenv1alpha1.PointAccountSpec{Description: description},
	}
	if err := c.Create(ctx, acct); err != nil {
		// A create can land and answer an error (the kube-apiserver's 504 "request did not
		// complete within requested timeout", a connection dropped after the request was
		// sent): the account found now, with this description, is the one created.
		existing, gerr := getAccount(ctx, c, name)
		switch {
		case gerr == nil && (apierrors.IsAlreadyExists(err) || refusedForSure(err) || !existing.DeletionTimestamp.IsZero() ||
			existing.Spec.Description != description):
			return accountExists(existing)
		case gerr == nil:
			acct = existing
		case refusedForSure(err):
			return fmt.Errorf("creating the PointAccount: %w", err)
		default:
			return fmt.Errorf("creating the PointAccount: %w; the cluster did not say that it refused it, so it may have been created all the same: "+
				"see %s account show %s before you create it again", err, displayName(), name)
		}
	}
	view := map[string]any{"account": name, "description": description, "balance": 0}
	if nsExisted {
		// After the listing, on stderr as task list's notes: -o json stays what it was.
		if left := leftInNamespace(ctx, o, c, acct); len(left) > 0 {
			defer fmt.Fprintf(stderr, "Note: namespace %q was there already, and the new account takes over what is in it: %s. "+
				"If the account is for someone else, delete it and the namespace, and create it again once the namespace is gone (docs/ledger.md, \"Deleting things\").\n",
				name, strings.Join(left, "; "))
		}
	}
	waiting, points := waitingTopUps(ctx, c, acct)
	if waiting > 0 {
		view["waitingTopUps"], view["waitingPoints"] = waiting, points
	}
	return o.print(view, func(w io.Writer) {
		if waiting > 0 {
			topUps := "top-ups made before it (%+d points: a payment, or a credit made while the account before it was closed) are"
			if waiting == 1 {
				topUps = "top-up made before it (%+d points: a payment, or a credit made while the account before it was closed) is"
			}
			fmt.Fprintf(w, "account %q created with 0 points; %d "+topUps+" applied to it now: %s account show %s\n",
				name, waiting, points, displayName(), name)
			return
		}
		fmt.Fprintf(w, "account %q created with 0 points; top it up with: %s topup %s AMOUNT --reference REF\n", name, displayName(), name)
	})
}

// leftInNamespace says what the namespace of acct, just created in a namespace that was there,
// holds from before that the new account's API keys reach: the tasks and short templates of an
// account closed there (a closed account's namespace stays until it is deleted:
// docs/ledger.md), its webhook signing Secret and the API keys not revoked; and then the
// top-ups of earlier accounts (alone they are only the audit trail, and say nothing). The REST
// API serves a namespace's tasks, templates and secret to its keys, and the keys act for the
// namespace. Each is best effort: what cannot be read is left out.
func leftInNamespace(ctx context.Context, o *options, c client.Client, acct *videogenv1alpha1.PointAccount) []string {
	name := acct.Namespace
	var left []string
	count := func(list client.ObjectList) string {
		if err := c.List(ctx, list, client.InNamespace(name), client.Limit(1)); err != nil {
			return ""
		}
		n := int64(meta.LenList(list))
		switch r := list.(metav1.ListInterface).GetRemainingItemCount(); {
		case n == 0:
			return ""
		case r != nil:
			n += *r
		case list.(metav1.ListInterface).GetContinue() != "":
			return "more than one"
		}
		return strconv.FormatInt(n, 10)
	}
	if n := count(&videogenv1alpha1.VideoTaskList{}); n != "" {
		left = append(left, n+" task(s), which its API keys list with their results, and whose Idempotency-Keys replay them")
	}
	if n := count(&videogenv1alpha1.ShortTemplateList{}); n != "" {
		left = append(left, n+" short template(s), which its API keys use and change")
	}
	var nsObj corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &nsObj); err == nil {
		var secret corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.keyNamespace, Name: webhooksecrets.SecretName(name)}, &secret); err == nil &&
			secret.DeletionTimestamp.IsZero() && accountns.MadeFor(&secret, &nsObj) {
			left = append(left, fmt.Sprintf("the webhook signing secret (Secret %s in %s), which its API keys read: the earlier receivers verify deliveries with it", secret.Name, o.keyNamespace))
		}
	}
	if keys, err := apikeys.List(ctx, c, o.keyNamespace, name); err == nil {
		var ids []string
		for _, k := range keys {
			if k.Orphaned == "" {
				ids = append(ids, k.ID)
			}
		}
		if len(ids) > 0 {
			left = append(left, fmt.Sprintf("API keys not revoked, which act for the new account (%s: %s apikey revoke ID)", strings.Join(ids, ", "), displayName()))
		}
	}
	if len(left) == 0 {
		return nil
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace(name)); err == nil {
		n := 0
		for _, t := range topUps.Items {
			if t.Status.AccountUID != "" && t.Status.AccountUID != acct.UID {
				n++
			}
		}
		if n > 0 {
			left = append(left, fmt.Sprintf("%d top-up(s) of earlier accounts, whose references stay used", n))
		}
	}
	return left
}

// noAccountError is account show's error for a namespace without an account. One whose account
// was closed keeps its top-ups (they cannot be deleted: the audit trail of the points it was
// credited and debited) until the namespace is deleted: the error says how many, and where.
func noAccountError(ctx context.Context, c client.Reader, name string) error {
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace(name)); err != nil || len(topUps.Items) == 0 {
		return fmt.Errorf("no account %q", name)
	}
	var sum int64
	applied := 0
	for _, t := range topUps.Items {
		if t.Status.AppliedAt != nil {
			applied++
			sum += t.Spec.Amount
		}
	}
	return fmt.Errorf("no account %q (closed, or not created yet); its namespace keeps %d top-up%s, %d of them applied (%+d points; an account closes at 0, so what the closed ones spent): kubectl get pointtopups -n %s",
		name, len(topUps.Items), plural(len(topUps.Items)), applied, sum, name)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// accountExists is account create's error for an account that is there: being closed, or
// open, with what it holds and how to see it (a create that failed may have made it).
func accountExists(acct *videogenv1alpha1.PointAccount) error {
	if !acct.DeletionTimestamp.IsZero() {
		return closingError(acct.Namespace, "create it again once it is gone")
	}
	return fmt.Errorf("account %q already exists (created %s, balance %d): %s account show %s",
		acct.Namespace, acct.CreationTimestamp.UTC().Format(time.RFC3339), acct.Status.Balance, displayName(), acct.Namespace)
}

// maxDescription is the most characters (not bytes) a PointAccount's description has, as its
// CRD's maxLength says (kubebuilder:validation:MaxLength on PointAccountSpec.Description).
const maxDescription = 256

// waitingTopUps counts the top-ups of acct's namespace that go to acct, the account just
// created, and their points: those no account has applied and that are not refused for good
// (made while it had no account, AccountNotFound, or while the account before was being
// closed, AccountClosing), and those applied to it already: the ledger applies them as soon
// as the account is there, often before this list. Nothing when they cannot be read.
func waitingTopUps(ctx context.Context, c client.Reader, acct *videogenv1alpha1.PointAccount) (n int, points int64) {
	var list videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &list, client.InNamespace(acct.Namespace)); err != nil {
		return 0, 0
	}
	for _, t := range list.Items {
		if (t.Status.AppliedAt == nil && !t.RefusedForGood()) || (t.Status.AppliedAt != nil && t.Status.AccountUID == acct.UID) {
			n++
			points += t.Spec.Amount
		}
	}
	return n, points
}

// accountNamespaceAllowed refuses a namespace that is not a tenant's: Kubernetes' own (kube-*)
// and the operator's (--key-namespace), whose API key Secrets an account's users must never reach.
func accountNamespaceAllowed(o *options, name string) error {
	switch {
	case strings.HasPrefix(name, "kube-"):
		return fmt.Errorf("%q cannot be an account: kube-* namespaces belong to Kubernetes; give the account a namespace of its own", name)
	case name == o.keyNamespace:
		return fmt.Errorf("%q cannot be an account: it is the operator's namespace (--key-namespace), which holds the API key Secrets; give the account a namespace of its own", name)
	}
	return nil
}

// operatorsNamespace says what shows that namespace is the operator's, installed elsewhere than
// --key-namespace: "" when nothing does. An account there would have its tenant's key, and the
// RBAC made for its users, act where every API key's and payment connector's Secret is. Told
// by what the installs make and an administrator may read: the namespace's own labels (the
// kustomize install labels it), API key Secrets (a platform administrator may list them in
// the operator's namespace), payment connectors' Secrets (likewise) and the operator's Deployment (a cluster administrator may read
// it; the chart's and the kustomize install's labels). A read that is refused says nothing.
func operatorsNamespace(ctx context.Context, c client.Reader, namespace string) string {
	operator := client.MatchingLabels{"app.kubernetes.io/name": "videogen-operator", "control-plane": "controller-manager"}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return "" // not there (it is created), or not readable
	}
	if labels.SelectorFromSet(labels.Set(operator)).Matches(labels.Set(ns.Labels)) {
		return "the operator's labels"
	}
	var secrets metav1.PartialObjectMetadataList
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, &secrets, client.InNamespace(namespace), client.MatchingLabels{apikeys.LabelAPIKey: "true"}, client.Limit(1)); err == nil && len(secrets.Items) > 0 {
		return "API key Secrets"
	}
	if err := c.List(ctx, &secrets, client.InNamespace(namespace), client.HasLabels{connectorsecrets.LabelConnector}, client.Limit(1)); err == nil && len(secrets.Items) > 0 {
		return "payment connector Secrets"
	}
	var deployments metav1.PartialObjectMetadataList
	deployments.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := c.List(ctx, &deployments, client.InNamespace(namespace), operator, client.Limit(1)); err == nil && len(deployments.Items) > 0 {
		return "the operator's Deployment " + deployments.Items[0].Name
	}
	return ""
}

// requireAccount says how to create the account when it does not exist, so that nothing is made
// for an account that is not there; it returns the account.
func requireAccount(ctx context.Context, c client.Reader, account string) (*videogenv1alpha1.PointAccount, error) {
	acct, err := getAccount(ctx, c, account)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no account %q: create it first with %s account create %s", account, displayName(), account)
	}
	return acct, err
}

func getAccount(ctx context.Context, c client.Reader, account string) (*videogenv1alpha1.PointAccount, error) {
	acct := &videogenv1alpha1.PointAccount{}
	err := c.Get(ctx, client.ObjectKey{Namespace: account, Name: videogenv1alpha1.PointAccountName}, acct)
	return acct, err
}

// closingError says that account is deleted and kept by the ledger's finalizer until it is
// empty: it takes no task, so it is no account to create, credit or issue keys for.
func closingError(account, then string) error {
	return fmt.Errorf("account %q is being closed (deleted: it takes no tasks, and goes once it is empty; %s account show %s says what it holds): %s",
		account, displayName(), account, then)
}

// accountView is what `account show` prints.
type accountView struct {
	Account string `json:"account"`
	// Description says whose account this is, as account create was told.
	Description string `json:"description"`
	Balance     int64  `json:"balance"`
	Frozen      int64  `json:"frozen"`
	Spent       int64  `json:"spent"`
	Credited    int64  `json:"credited"`
	Ready       string `json:"ready"`
	// Holds are the open tasks holding points (each task is its own hold).
	Holds []holdView `json:"holds"`
	// RecentTop are the newest top-ups of this account, debits and corrections included: those
	// applied to it and those not applied yet (or refused).
	RecentTop []topUpView `json:"recentTopUps"`
	// OlderTopUps counts this account's top-ups beyond the recentTopUps newest.
	OlderTopUps int `json:"olderTopUps"`
	// EarlierAccountTopUps counts the top-ups applied to earlier accounts of the namespace
	// (deleted since): they are not in credited, and their references stay used.
	EarlierAccountTopUps int `json:"earlierAccountTopUps"`
	// EarlierAccountPoints is the sum of the earlierAccountTopUps' amounts, debits included:
	// what the earlier accounts spent, since an account closes only at 0.
	EarlierAccountPoints int64 `json:"earlierAccountPoints"`
	// EarlierAccountRefusals counts the top-ups earlier accounts of the namespace refused.
	EarlierAccountRefusals int `json:"earlierAccountRefusals"`
	// NamespaceDeleting: the account's namespace is being deleted (it stays Terminating while
	// the account has points, and no debit can be made there to close it).
	NamespaceDeleting bool `json:"namespaceDeleting,omitempty"`
}

// recentTopUps is how many top-ups `account show` lists.
const recentTopUps = 10

// holdView is an open task holding points, with its phase and age.
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
	// Note says why, for a debit or a correction.
	Note string `json:"note,omitempty"`
	// Refused is the reason the top-up was never applied (DuplicateReference, DebitExceedsBalance).
	Refused string `json:"refused,omitempty"`
	// Waiting is AccountClosing for a credit made while the account is being closed: it is not
	// applied to it but to the account created after it (docs/ledger.md).
	Waiting string `json:"waiting,omitempty"`
}

// heldBy returns the points an open task holds: its status says Frozen, or the ledger created
// it with its price and the controller has not written its status yet.
func heldBy(t *videogenv1alpha1.VideoTask) (int64, bool) {
	switch {
	case t.Status.Phase.Terminal():
		return 0, false
	case t.Status.Charge == videogenv1alpha1.ChargeFrozen && t.Status.Cost != nil:
		return *t.Status.Cost, true
	case t.Status.Charge == "":
		return t.AdmittedPrice()
	}
	return 0, false
}

func accountShow(ctx context.Context, o *options, name string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	acct := &videogenv1alpha1.PointAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: name, Name: videogenv1alpha1.PointAccountName}, acct); err != nil {
		if apierrors.IsNotFound(err) {
			return noAccountError(ctx, c, name)
		}
		return err
	}
	var topUps videogenv1alpha1.PointTopUpList
	if err := c.List(ctx, &topUps, client.InNamespace(name)); err != nil {
		return err
	}
	v := accountView{Account: name, Description: acct.Spec.Description, Balance: acct.Status.Balance, Frozen: acct.Status.Frozen,
		Spent: acct.Status.Spent, Credited: acct.Status.Credited, Ready: "Unknown", Holds: []holdView{}, RecentTop: []topUpView{}}
	if acct.Status.Holds > 0 {
		var tasks videogenv1alpha1.VideoTaskList
		if err := c.List(ctx, &tasks, client.InNamespace(name),
			client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector(videogenv1alpha1.FieldStatusClosed, "true")}); err != nil {
			return err
		}
		slices.SortFunc(tasks.Items, func(a, b videogenv1alpha1.VideoTask) int { return strings.Compare(a.Name, b.Name) })
		for _, t := range tasks.Items {
			points, ok := heldBy(&t)
			if !ok {
				continue
			}
			// In UTC, as kubectl and the top-up's name say it, not in the zone of the machine
			// (the client decodes times into time.Local).
			created := t.CreationTimestamp.UTC()
			h := holdView{Task: t.Name, Points: points, TaskPhase: string(t.Status.Phase), Since: &created}
			if h.TaskPhase == "" {
				h.TaskPhase = "Pending"
			}
			v.Holds = append(v.Holds, h)
		}
	}
	if cond := meta.FindStatusCondition(acct.Status.Conditions, videogenv1alpha1.ConditionReady); cond != nil {
		v.Ready = fmt.Sprintf("%s (%s)", cond.Status, cond.Reason)
	}
	// Only this account's: a re-created account is another account, and the top-ups applied to
	// the earlier one (which cannot be deleted) are not in its credited, nor are its refusals
	// this one's. A refusal without accountUID (an older operator's) stays listed.
	topUps.Items = slices.DeleteFunc(topUps.Items, func(t videogenv1alpha1.PointTopUp) bool {
		switch {
		case t.Status.AppliedAt != nil && t.Status.AccountUID != acct.UID:
			v.EarlierAccountTopUps++
			v.EarlierAccountPoints += t.Spec.Amount
		case t.Status.AppliedAt == nil && t.RefusedForGood() && t.Status.AccountUID != "" && t.Status.AccountUID != acct.UID:
			v.EarlierAccountRefusals++
		default:
			return false
		}
		return true
	})
	// Newest first, and only the latest few: an account topped up monthly for years would
	// otherwise bury its balance under its history (kubectl get pointtopups has it all).
	newestTopUpsFirst(topUps.Items)
	v.OlderTopUps = max(len(topUps.Items)-recentTopUps, 0)
	for _, t := range topUps.Items[:len(topUps.Items)-v.OlderTopUps] {
		tv := topUpView{Name: t.Name, Amount: t.Spec.Amount, Reference: t.Spec.Reference, Note: t.Spec.Note, BalanceAfter: t.Status.BalanceAfter}
		// Only a refusal for good: AccountNotFound is a top-up still to be applied (the account
		// was created after it, and the ledger has not got to it yet).
		if t.RefusedForGood() {
			tv.Refused = meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied).Reason
		}
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); t.Status.AppliedAt == nil && cond != nil &&
			cond.Status == metav1.ConditionFalse && cond.Reason == videogenv1alpha1.ReasonAccountClosing {
			tv.Waiting = cond.Reason
		}
		if t.Status.AppliedAt != nil {
			at := t.Status.AppliedAt.UTC()
			tv.AppliedAt = &at
		}
		v.RecentTop = append(v.RecentTop, tv)
	}
	// Ready says Active still: the account's own status knows nothing of its namespace. A
	// read that is refused says nothing.
	var ns corev1.Namespace
	v.NamespaceDeleting = c.Get(ctx, client.ObjectKey{Name: name}, &ns) == nil && !ns.DeletionTimestamp.IsZero()
	if err := o.print(v, v.table); err != nil {
		return err
	}
	if v.NamespaceDeleting && (o.output == "" || o.output == "table") {
		fmt.Fprintf(stderr, "Namespace %q is being deleted: it stays Terminating while its account has points, and no debit can be made there to close it (docs/ledger.md, \"Close the account before deleting its namespace\").\n", name)
	}
	return nil
}

// newestTopUpsFirst orders top-ups by creationTimestamp, newest first, and those of one second
// (the kube-apiserver keeps it to the second) by name, descending: topUpName's names sort by
// the millisecond they were made in.
func newestTopUpsFirst(items []videogenv1alpha1.PointTopUp) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return items[i].Name > items[j].Name
	})
}

// table prints the account's balances, then one section per kind of record: add a section for
// a new kind of record here and a field for it in accountView.
func (v accountView) table(w io.Writer) {
	_ = sections(w, v.balancesTable, v.holdsTable, v.topUpsTable)
}

func (v accountView) balancesTable(w io.Writer) {
	fmt.Fprintf(w, "ACCOUNT\tBALANCE\tFROZEN\tSPENT\tCREDITED\tREADY\tDESCRIPTION\n%s\t%d\t%d\t%d\t%d\t%s\t%s\n",
		v.Account, v.Balance, v.Frozen, v.Spent, v.Credited, terminalSafe(v.Ready), orDash(terminalSafe(v.Description)))
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
		v.earlierTopUpsLine(w, "\n")
		return
	}
	// BALANCE AFTER as kubectl get pointtopups shows it: the available balance right after the
	// top-up, for an auditor to chain them.
	fmt.Fprintf(w, "\nTOP-UP\tAMOUNT\tREFERENCE\tAPPLIED\tBALANCE AFTER\tNOTE\n")
	for _, t := range v.RecentTop {
		applied := "pending"
		switch {
		case t.AppliedAt != nil:
			applied = t.AppliedAt.Format(time.RFC3339)
		case t.Refused != "":
			applied = "refused: " + t.Refused
		case t.Waiting == videogenv1alpha1.ReasonAccountClosing:
			applied = "not here: for the account created next"
		}
		// The note and the reference are anyone's text who may create top-ups: escaped.
		after := "-"
		if t.BalanceAfter != nil {
			after = strconv.FormatInt(*t.BalanceAfter, 10)
		}
		fmt.Fprintf(w, "%s\t%+d\t%s\t%s\t%s\t%s\n", t.Name, t.Amount, terminalSafe(t.Reference), applied, after, terminalSafe(t.Note))
	}
	if v.OlderTopUps > 0 {
		fmt.Fprintf(w, "(%d older: kubectl get pointtopups -n %s)\n", v.OlderTopUps, v.Account)
	}
	v.earlierTopUpsLine(w, "")
}

// earlierTopUpsLine says how many top-ups earlier accounts of the namespace applied or refused,
// which the list and credited leave out.
func (v accountView) earlierTopUpsLine(w io.Writer, before string) {
	var which []string
	if v.EarlierAccountTopUps > 0 {
		which = append(which, fmt.Sprintf("%d applied to", v.EarlierAccountTopUps))
	}
	if v.EarlierAccountRefusals > 0 {
		which = append(which, fmt.Sprintf("%d refused by", v.EarlierAccountRefusals))
	}
	if len(which) == 0 {
		return
	}
	fmt.Fprintf(w, "%s(%s earlier accounts of namespace %s, not in credited: kubectl get pointtopups -n %s)\n",
		before, strings.Join(which, " and "), v.Account, v.Account)
	if v.EarlierAccountTopUps > 0 {
		// As noAccountError says it of a namespace whose account is closed.
		fmt.Fprintf(w, "(the earlier accounts' top-ups applied come to %+d points; an account closes at 0, so what they spent)\n", v.EarlierAccountPoints)
	}
}
