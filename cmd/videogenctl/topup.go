package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

func newTopUpCommand(o *options) *cobra.Command {
	var reference, note string
	var noWait, debit bool
	cmd := &cobra.Command{
		Use:   "topup ACCOUNT AMOUNT --reference REF [--note TEXT] [--debit] [--no-wait]",
		Short: "Credit (or, with --debit and a note, debit) an account's points and wait until the operator applied it",
		Long: `Creates a PointTopUp, the account's audit record of the change, and waits until the
operator applied it. --debit takes AMOUNT from the account instead (a correction, or what is
left when it is closed) and needs --note saying why, e.g. topup acme 50 --debit --reference
CORR-1 --note "double invoice". A reference is unique in the account's namespace for as long
as the namespace lives: a second top-up with a reference already applied there, to this
account or to an earlier one deleted since, is refused. References are compared as an
accountant reads them, not character by character: inv-1, INV‑1 with a non-breaking hyphen and
a fullwidth ＩＮＶ-１ are INV-1 (docs/ledger.md, rule 6); INV 1, INV.1 and INV1 are three
others. The account must exist (account create): for one that does not,
nothing is created. AMOUNT is at most ` + strconv.FormatInt(videogenv1alpha1.MaxPoints, 10) + ` points, either way: a larger
amount is several top-ups.`,
		Args:              exactArgs(2),
		ValidArgsFunction: firstArg(o.completeAccounts),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reference) == "" {
				return fmt.Errorf("--reference is required (an invoice number, a ticket: it is unique in the account's namespace); usage: %s", cmd.UseLine())
			}
			if err := checkTopUpText(reference, note); err != nil {
				return err
			}
			if err := o.checkViewFormat(); err != nil {
				return err
			}
			amount, err := parseAmount(args[1], debit)
			if err != nil {
				return err
			}
			// -n naming another account is refused, as for the other commands: either may be
			// the one meant, and the points go to one of them.
			account, err := listNamespace(o, args[0])
			if err != nil {
				return err
			}
			return topUp(cmd.Context(), o, account, amount, reference, note, noWait)
		},
	}
	cmd.Flags().StringVar(&reference, "reference", "", "paperwork reference, e.g. an invoice number (required)")
	cmd.Flags().StringVar(&note, "note", "", "free text for the audit trail; required for a debit (--debit)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "do not wait for the credit")
	cmd.Flags().BoolVar(&debit, "debit", false, "take AMOUNT from the account (needs --note)")
	cmd.SetFlagErrorFunc(negativeAmountHint)
	return cmd
}

// negativeAmountHint explains the flag parser's refusal of a negative AMOUNT ("-30" reads as
// the shorthand flags -3 and -0): a debit is a positive AMOUNT with --debit.
func negativeAmountHint(cmd *cobra.Command, err error) error {
	_, arg, found := strings.Cut(err.Error(), " in -")
	if _, perr := strconv.ParseUint(arg, 10, 64); !found || perr != nil {
		return err
	}
	return fmt.Errorf("%w: to debit, give AMOUNT without its sign and add --debit and --note, e.g. %s ACCOUNT %s --debit --reference CORR-1 --note \"double invoice\"",
		err, cmd.CommandPath(), arg)
}

// maxReference and maxNote are the most characters (not bytes) a PointTopUp's reference and note
// have, as its CRD's maxLength says (kubebuilder:validation:MaxLength on PointTopUpSpec).
const (
	maxReference = 128
	maxNote      = 1024
)

// checkTopUpText refuses a reference or a note longer than a PointTopUp takes, before any
// request: the kube-apiserver's refusal quotes the CRD's schema.
func checkTopUpText(reference, note string) error {
	if n := utf8.RuneCountInString(reference); n > maxReference {
		return fmt.Errorf("--reference is %d characters long; a top-up's is at most %d", n, maxReference)
	}
	if n := utf8.RuneCountInString(note); n > maxNote {
		return fmt.Errorf("--note is %d characters long; a top-up's is at most %d", n, maxNote)
	}
	return nil
}

// parseAmount reads AMOUNT, a whole number of points above 0: a debit is said with --debit, as
// the help says, never with a sign. At most videogenv1alpha1.MaxPoints either way, the bound
// of the PointTopUp CRD's spec.amount (api/v1alpha1/pointtopup_types.go): checked here, before
// any request, or the kube-apiserver's refusal quotes the CRD's schema.
func parseAmount(arg string, debit bool) (int64, error) {
	n, err := strconv.ParseInt(arg, 10, 64)
	// ParseInt's range error comes with the largest int64 for a number too large to hold.
	if errors.Is(err, strconv.ErrRange) && n > 0 || err == nil && n > videogenv1alpha1.MaxPoints {
		verb := "credit"
		if debit {
			verb = "debit"
		}
		return 0, fmt.Errorf("AMOUNT must be at most %d points, the most one top-up can %s, not %s: split a larger amount into several top-ups, each with its own --reference",
			videogenv1alpha1.MaxPoints, verb, arg)
	}
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("AMOUNT must be a whole number of points above 0 (to debit, add --debit and --note), not %q", arg)
	}
	if debit {
		return -n, nil
	}
	return n, nil
}

// topUpName names a top-up made at now: topup-<date>-<time>-<milliseconds>-<random hex>. The
// kube-apiserver keeps creationTimestamp to the second, and account show lists the top-ups of
// one second by name, descending: the milliseconds make that the newest first (with a random
// part only, the top-ups of a script's second came in random order, and the 10-newest cut could
// hide a newer one behind an older one).
func topUpName(now time.Time, random [3]byte) string {
	now = now.UTC()
	return fmt.Sprintf("topup-%s-%03d-%s", now.Format("20060102-150405"), now.Nanosecond()/int(time.Millisecond), hex.EncodeToString(random[:]))
}

// topUp creates a PointTopUp of amount points (negative for a debit) and waits until the
// operator applied it.
func topUp(ctx context.Context, o *options, account string, amount int64, reference, note string, noWait bool) error {
	if amount < 0 && strings.TrimSpace(note) == "" {
		return fmt.Errorf("a debit needs --note saying why (it stays in the account's audit trail)")
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	// A top-up in a namespace without an account would wait there and be credited to whoever
	// creates the account later.
	acct, err := requireAccount(ctx, c, account)
	if err != nil {
		return err
	}
	// A credit to a closing account would wait for the account created after it (the ledger
	// applies none to an account that is going); a debit is what closes it.
	if amount > 0 && !acct.DeletionTimestamp.IsZero() {
		return closingError(account, "a credit would only wait for the account created after it; debit what is left, or credit the account created again once it is gone")
	}
	t, err := createTopUp(ctx, c, account, amount, reference, note)
	if err != nil {
		return err
	}
	if noWait {
		view := map[string]any{"topUp": t.Name, "account": account, "amount": amount, "reference": reference}
		return o.print(view, func(w io.Writer) { fmt.Fprintf(w, "top-up %s created\n", t.Name) })
	}
	if err := waitApplied(ctx, c, t, acct); err != nil {
		return err
	}
	verb, to := "credit", "to"
	if amount < 0 {
		verb, to = "debit", "from"
	}
	view := map[string]any{"topUp": t.Name, "account": account, "amount": amount, "reference": reference, "balanceAfter": *t.Status.BalanceAfter}
	return o.print(view, func(w io.Writer) {
		fmt.Fprintf(w, "%sed %d points %s %s (reference %s); balance is now %d\n", verb, max(amount, -amount), to, account, reference, *t.Status.BalanceAfter)
	})
}

// createTopUp creates a PointTopUp of amount for account, under a name of its own, and returns
// it; a create that failed but landed all the same (createdAllTheSame) is no error.
func createTopUp(ctx context.Context, c client.Client, account string, amount int64, reference, note string) (*videogenv1alpha1.PointTopUp, error) {
	var b [3]byte
	_, _ = rand.Read(b[:])
	t := &videogenv1alpha1.PointTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: account, Name: topUpName(time.Now(), b)},
		Spec:       videogenv1alpha1.PointTopUpSpec{Amount: amount, Reference: reference, Note: note},
	}
	if err := c.Create(ctx, t); err != nil {
		if err := createdAllTheSame(ctx, c, t, err); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// waitApplied waits until the ledger applied top-up t to acct, its account, and reads it into
// t; an error says why it was not, and what becomes of it.
func waitApplied(ctx context.Context, c client.Reader, t *videogenv1alpha1.PointTopUp, acct *videogenv1alpha1.PointAccount) error {
	account, amount := t.Namespace, t.Spec.Amount
	verb := "credit"
	if amount < 0 {
		verb = "debit"
	}
	spin := newSpinner(stderr, fmt.Sprintf("waiting for the operator to %s %d points", verb, max(amount, -amount)))
	var refusal, closing string
	var gone bool // the account was deleted after the check above
	// lastErr is the last read that failed: one that fails (a 500 while etcd changes leader, a
	// dropped connection) does not end the wait, or the CLI would say "not applied" of a
	// top-up the operator credits a moment later, and the administrator credit it again.
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, topUpWait, true, func(context.Context) (bool, error) {
		spin.tick()
		// Read under ctx, not the wait's own: a read the wait's deadline cut short (or that
		// client-go's rate limiter refused as ending past it, as at the last tick) is no
		// failed read, and would hide why the top-up was not applied (its status says). A
		// read has topUpRead of its own, so that a cluster that does not answer still ends it.
		readCtx, cancel := context.WithTimeout(ctx, topUpRead)
		defer cancel()
		if err := c.Get(readCtx, client.ObjectKeyFromObject(t), t); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return false, err // no read that follows would answer
			}
			lastErr = err
			return false, nil
		}
		lastErr = nil
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil &&
			(cond.Reason == videogenv1alpha1.ReasonDuplicateReference || cond.Reason == videogenv1alpha1.ReasonDebitExceedsBalance) {
			refusal = cond.Message
			return true, nil
		}
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil && t.Status.AppliedAt == nil &&
			cond.Status == metav1.ConditionFalse && cond.Reason == videogenv1alpha1.ReasonAccountClosing {
			// The account was deleted after the check above: the credit waits for the account
			// created after it, which no wait of ours sees.
			closing = cond.Message
			return true, nil
		}
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil && t.Status.AppliedAt == nil &&
			cond.Status == metav1.ConditionFalse && cond.Reason == videogenv1alpha1.ReasonAccountNotFound {
			// Either the account went after the check above (the top-up waits for the account
			// created next, which no wait of ours sees) or the ledger has not seen it yet (it
			// was created a moment ago, and the top-up is applied shortly): the kube-apiserver
			// says which.
			err := c.Get(readCtx, client.ObjectKeyFromObject(acct), &videogenv1alpha1.PointAccount{})
			if apierrors.IsNotFound(err) {
				gone = true
				return true, nil
			}
		}
		return t.Status.AppliedAt != nil, nil
	})
	spin.done()
	if refusal != "" {
		// The ledger's message starts "Refused: " for kubectl describe; ours says it already.
		return fmt.Errorf("top-up %s refused: %s", t.Name, strings.TrimPrefix(refusal, "Refused: "))
	}
	if gone {
		return fmt.Errorf("top-up %s not %sed: account %s was deleted after it was made; it waits, and is applied to the account created next in the namespace (kubectl get pointtopup %s -n %s)",
			t.Name, verb, account, t.Name, account)
	}
	if closing != "" {
		return fmt.Errorf("top-up %s not %sed to %s, which is being closed: %s (kubectl get pointtopup %s -n %s)", t.Name, verb, account, closing, t.Name, account)
	}
	if err != nil {
		msg := "is the operator running?"
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil {
			msg = cond.Message
		}
		switch {
		case ctx.Err() != nil:
			// Ctrl-C stops the wait, not the top-up: say so, or it looks called off.
			return fmt.Errorf("interrupted before top-up %s was applied: it stays, and is applied all the same when the operator gets to it (kubectl get pointtopup %s -n %s)",
				t.Name, t.Name, account)
		case lastErr != nil:
			msg = fmt.Sprintf("its last read failed (%v); see kubectl get pointtopup %s -n %s", lastErr, t.Name, account)
		case !wait.Interrupted(err):
			msg = fmt.Sprintf("reading it failed (%v)", err)
		}
		return fmt.Errorf("top-up %s not applied yet: %s", t.Name, msg)
	}
	if t.Status.BalanceAfter == nil || t.Status.AccountUID == "" {
		// The operator writes appliedAt with balanceAfter and accountUID, after its credit; a
		// status that says applied without them was written by hand, and the ledger never
		// credits a top-up whose status says applied.
		return fmt.Errorf("top-up %s not %sed: its status says applied but was not written by the operator (no balanceAfter or accountUID), "+
			"and a top-up marked applied is never applied; see kubectl describe pointtopup %s -n %s", t.Name, verb, t.Name, account)
	}
	return nil
}

// createdAllTheSame is nil when the top-up whose create failed with err exists all the same: a
// write that lands but reports an error (the kube-apiserver's 504 "request did not complete
// within requested timeout", which may still be processing it; a connection dropped, or
// --request-timeout, after the request was sent). Its name is ours alone, so a top-up of that
// name is this one, and is waited for as any other. Otherwise the error, saying whether the
// top-up may have been made: the cluster refused it (invalid, forbidden, ...), or did not say.
func createdAllTheSame(ctx context.Context, c client.Reader, t *videogenv1alpha1.PointTopUp, err error) error {
	if refusedForSure(err) {
		return fmt.Errorf("creating the top-up: %w", err)
	}
	// Not cut by a Ctrl-C that cut the create: whether the top-up was made is what the
	// administrator needs to know before topping up again.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), topUpRead)
	defer cancel()
	if gerr := c.Get(readCtx, client.ObjectKeyFromObject(t), t); gerr == nil {
		return nil
	}
	return fmt.Errorf("creating top-up %s: %w; the cluster did not say that it refused it, so it may have been made all the same: see kubectl get pointtopup %s -n %s "+
		"before you top up again (again with --reference %s: a second top-up of a reference applied already is refused, never applied twice)",
		t.Name, err, t.Name, t.Namespace, t.Spec.Reference)
}

// refusedForSure says that the kube-apiserver answered err to a request it did not carry out.
func refusedForSure(err error) bool {
	for _, refused := range []func(error) bool{apierrors.IsInvalid, apierrors.IsBadRequest, apierrors.IsForbidden, apierrors.IsUnauthorized,
		apierrors.IsNotFound, apierrors.IsAlreadyExists, apierrors.IsConflict, apierrors.IsTooManyRequests, apierrors.IsMethodNotSupported,
		apierrors.IsNotAcceptable, apierrors.IsUnsupportedMediaType, apierrors.IsRequestEntityTooLargeError} {
		if refused(err) {
			return true
		}
	}
	return false
}

// topUpWait is how long topup waits for the operator to apply a top-up (tests shorten it).
var topUpWait = time.Minute

// topUpRead is how long one read of the top-up may take while topup waits.
const topUpRead = 10 * time.Second

// stderr is where progress goes (tests replace it).
var stderr io.Writer = os.Stderr

// spinner shows that a wait is alive: an animated line on a terminal, and on anything else (a
// log, a pipe) the label once and how it ended, without control characters.
type spinner struct {
	out   io.Writer
	label string
	tty   bool
	n     int
}

func newSpinner(out io.Writer, label string) *spinner {
	s := &spinner{out: out, label: label, tty: isTerminal(out)}
	if !s.tty {
		fmt.Fprintf(out, "%s …\n", label)
	}
	return s
}

func (s *spinner) tick() {
	if s.tty {
		frames := `|/-\`
		fmt.Fprintf(s.out, "\r%c %s", frames[s.n%len(frames)], s.label)
	}
	s.n++
}

func (s *spinner) done() {
	if s.tty {
		fmt.Fprint(s.out, "\r\033[K")
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
