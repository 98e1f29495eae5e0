package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// task get and account show print sections one under the other (the task, its stages; the
// balances, the holds, the top-ups): each is padded to its own widest cell. Before the fix they
// shared one kubectl tabwriter, which remembers column widths from one section to the next: a
// stage's PROGRESS was padded to the task's CAPABILITY ("PROGRESS         BACKEND"), a top-up's
// AMOUNT to the account's BALANCE.
func TestSectionsArePaddedToTheirOwnCells(t *testing.T) {
	task := &videogenv1alpha1.VideoTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "vt-42ji3h6heaah34de3y5jriqz", CreationTimestamp: metav1.Now()},
		Spec:       videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityTemplate},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskRunning, Cost: ptr.To[int64](35), Charge: videogenv1alpha1.ChargeFrozen,
			Stages: []videogenv1alpha1.StageStatus{
				{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Progress: 100, Backend: "reference-worker", Message: "done"},
				{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageRunning, Progress: 5, Backend: "reference-worker", Message: "rendering"}}},
	}
	var out bytes.Buffer
	if err := taskDetails(&out, task); err != nil {
		t.Fatal(err)
	}
	if want := "STAGE     STATE       PROGRESS   BACKEND            MESSAGE\n"; !strings.Contains(out.String(), want) {
		t.Errorf("task get's stages:\n%s\nwant the header %q", out.String(), want)
	}

	at := time.Date(2026, 11, 28, 16, 55, 37, 0, time.UTC)
	v := accountView{Account: "acme", Balance: 950, Credited: 950, Ready: "True (Active)",
		RecentTop: []topUpView{{Name: "topup-20261128-165536-402-998350", Amount: 1000, Reference: "INV-1", AppliedAt: &at}}}
	out.Reset()
	if err := (&options{out: &out}).print(v, v.table); err != nil {
		t.Fatal(err)
	}
	if want := "TOP-UP                             AMOUNT   REFERENCE   APPLIED"; !strings.Contains(out.String(), want) {
		t.Errorf("account show's top-ups:\n%s\nwant the header %q", out.String(), want)
	}
}
