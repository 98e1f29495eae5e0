package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// AMOUNT's errors say what the help says: a debit is a positive AMOUNT with --debit, never a
// sign (which the flag parser mistakes for flags anyway).
func TestTopUpAmountErrorsPointToDebitFlag(t *testing.T) {
	for _, args := range [][]string{
		{"topup", "acme", "ten", "--reference", "INV-1"},
		{"topup", "acme", "0", "--reference", "INV-1"},
		{"topup", "acme", "--reference", "CORR-1", "--note", "double invoice", "--", "-5"},
		{"topup", "acme", "-5", "--reference", "CORR-1"},
	} {
		// Never a real cluster's: a refusal that came too late would have made the top-up.
		args = append([]string{"--kubeconfig", filepath.Join(t.TempDir(), "none")}, args...)
		var out bytes.Buffer
		err := run(context.Background(), args, &out)
		if err == nil || !strings.Contains(err.Error(), "--debit") || strings.Contains(err.Error(), "negative") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
}
