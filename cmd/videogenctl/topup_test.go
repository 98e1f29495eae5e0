package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
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

// AMOUNT above the PointTopUp CRD's bound (1000000000, either way), and a --reference or --note
// longer than it takes, are refused before any request,
// in words, as 0 and -5 are: the kube-apiserver's refusal quoted the CRD's schema ("spec.amount
// in body should be less than or equal to 1000000000"). The cluster here answers nothing and
// counts what it is asked.
func TestTopUpAmountAboveTheMostOneTopUpCanMoveIsRefusedBeforeAnyRequest(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no request was expected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", srv.URL, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topup", "kacct", "2000000000", "--reference", "Z-3"},
			"AMOUNT must be at most 1000000000 points, the most one top-up can credit, not 2000000000: split a larger amount into several top-ups, each with its own --reference"},
		{[]string{"topup", "kacct", "1000000001", "--reference", "Z-3"},
			"AMOUNT must be at most 1000000000 points, the most one top-up can credit, not 1000000001: split a larger amount into several top-ups, each with its own --reference"},
		{[]string{"topup", "kacct", "2000000000", "--debit", "--reference", "CORR-1", "--note", "double invoice"},
			"AMOUNT must be at most 1000000000 points, the most one top-up can debit, not 2000000000: split a larger amount into several top-ups, each with its own --reference"},
		// A reference or a note longer than the CRD takes: in words too.
		{[]string{"topup", "kacct", "5", "--reference", strings.Repeat("R", 129)},
			"--reference is 129 characters long; a top-up's is at most 128"},
		{[]string{"topup", "kacct", "5", "--debit", "--reference", "CORR-2", "--note", strings.Repeat("é", 1025)},
			"--note is 1025 characters long; a top-up's is at most 1024"},
		// Too large for an int64: the same answer, not "a whole number of points above 0".
		{[]string{"topup", "kacct", "99999999999999999999", "--reference", "Z-3"},
			"AMOUNT must be at most 1000000000 points, the most one top-up can credit, not 99999999999999999999: split a larger amount into several top-ups, each with its own --reference"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(tc.args, flags...), &out)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v:\n got %v\nwant %s", tc.args, err, tc.want)
		}
		if n := requests.Swap(0); n != 0 || out.Len() != 0 {
			t.Errorf("%v: %d requests made, printed %q; want none before AMOUNT is checked", tc.args, n, out.String())
		}
	}
	// The bound itself is a top-up's, either way.
	for _, debit := range []bool{false, true} {
		want := videogenv1alpha1.MaxPoints
		if debit {
			want = -want
		}
		if n, err := parseAmount("1000000000", debit); err != nil || n != want {
			t.Errorf("parseAmount(1000000000, debit %v) = %d, %v; want %d", debit, n, err, want)
		}
	}
}
