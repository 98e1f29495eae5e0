package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// topUpCommand creates a PointTopUp and waits until the operator credited it.
func topUpCommand(ctx context.Context, args []string, out io.Writer) error {
	var g globals
	var reference, note string
	var noWait bool
	fs := flag.NewFlagSet("topup", flag.ContinueOnError)
	g.bind(fs)
	fs.StringVar(&reference, "reference", "", "paperwork reference, e.g. an invoice number (required)")
	fs.StringVar(&note, "note", "", "free text for the audit trail; required for a debit (a negative AMOUNT)")
	fs.BoolVar(&noWait, "no-wait", false, "do not wait for the credit")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || strings.TrimSpace(reference) == "" {
		return fmt.Errorf("usage: videogenctl topup ACCOUNT AMOUNT --reference REF [--note TEXT]  (a negative AMOUNT debits, after --: topup ACCOUNT --reference REF --note WHY -- -50)")
	}
	amount, err := strconv.ParseInt(pos[1], 10, 64)
	if err != nil || amount == 0 {
		return fmt.Errorf("AMOUNT must be a whole number of points other than 0 (negative to debit), not %q", pos[1])
	}
	if amount < 0 && strings.TrimSpace(note) == "" {
		return fmt.Errorf("a debit needs --note saying why (it stays in the account's audit trail)")
	}
	c, err := g.kubeClient()
	if err != nil {
		return err
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	t := &videogenv1alpha1.PointTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: pos[0], Name: fmt.Sprintf("topup-%s-%s", time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b[:]))},
		Spec:       videogenv1alpha1.PointTopUpSpec{Amount: amount, Reference: reference, Note: note},
	}
	if err := c.Create(ctx, t); err != nil {
		return fmt.Errorf("creating the top-up: %w", err)
	}
	if noWait {
		fmt.Fprintf(out, "top-up %s created\n", t.Name)
		return nil
	}
	verb := "credit"
	if amount < 0 {
		verb = "debit"
	}
	spin := newSpinner(stderr, fmt.Sprintf("waiting for the operator to %s %d points", verb, max(amount, -amount)))
	var refusal string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		spin.tick()
		if err := c.Get(ctx, client.ObjectKeyFromObject(t), t); err != nil {
			return false, err
		}
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil &&
			(cond.Reason == videogenv1alpha1.ReasonDuplicateReference || cond.Reason == videogenv1alpha1.ReasonDebitExceedsBalance) {
			refusal = cond.Message
			return true, nil
		}
		return t.Status.AppliedAt != nil, nil
	})
	spin.done()
	if refusal != "" {
		return fmt.Errorf("top-up %s refused: %s", t.Name, refusal)
	}
	if err != nil {
		msg := "is the operator running?"
		if cond := meta.FindStatusCondition(t.Status.Conditions, videogenv1alpha1.ConditionApplied); cond != nil {
			msg = cond.Message
		}
		return fmt.Errorf("top-up %s not applied yet: %s", t.Name, msg)
	}
	view := map[string]any{"topUp": t.Name, "account": pos[0], "amount": amount, "reference": reference, "balanceAfter": *t.Status.BalanceAfter}
	return g.print(out, view, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%sed %d points to %s (reference %s); balance is now %d\n", verb, max(amount, -amount), pos[0], reference, *t.Status.BalanceAfter)
	})
}

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
