package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// columnStarts are the offsets at which the space-separated values of line begin.
func columnStarts(line string) []int {
	var starts []int
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(line, -1) {
		starts = append(starts, m[0])
	}
	return starts
}

// misaligned lists the lines of out whose columns do not start where the header's do.
func misaligned(out string) []string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := columnStarts(lines[0])
	var bad []string
	for _, l := range lines[1:] {
		if !slices.Equal(columnStarts(l), header) {
			bad = append(bad, l)
		}
	}
	return bad
}

// A task followed from queued to its end, rows printed one at a time as the watch sees them:
// every column stays where the header put it, whatever the status, phase, charge and reason.
func TestTaskWatchColumnsLineUpAcrossRows(t *testing.T) {
	created := time.Now().Add(-3 * time.Second)
	cost := ptr.To[int64](30)
	rows := []taskRow{
		{Account: "acme", ID: "vt-1", Capability: "video.eraser", Status: "queued", CreatedAt: created},
		{Account: "acme", ID: "vt-1", Capability: "video.eraser", Status: "running", Phase: "analyze", Progress: 5, Cost: cost, Charge: "Frozen", CreatedAt: created},
		{Account: "acme", ID: "vt-1", Capability: "video.eraser", Status: "running", Phase: "render", Progress: 60, Cost: cost, Charge: "Frozen", CreatedAt: created},
		{Account: "acme", ID: "vt-1", Capability: "video.eraser", Status: "succeeded", Phase: "render", Progress: 100, Cost: cost, Charge: "Deducted", Reason: "Succeeded", CreatedAt: created},
		{Account: "acme", ID: "vt-2", Capability: "video.template", Status: "failed", Cost: cost, Reason: "InsufficientBalance", CreatedAt: created},
		{Account: "acme", ID: "vt-3", Capability: "image.pose", Status: "canceled", Phase: "analyze", Progress: 40, Cost: cost, Charge: "Refunded", Reason: "Canceled", CreatedAt: created},
	}
	var out bytes.Buffer
	table := newWatchTable(&out)
	for _, r := range rows {
		if err := table.print(r.cells()); err != nil {
			t.Fatal(err)
		}
	}
	if bad := misaligned(out.String()); len(bad) > 0 {
		t.Errorf("rows whose columns moved:\n%s\nin\n%s", strings.Join(bad, "\n"), out.String())
	}
}

// As kubectl get -w: the first listing lines up within itself; a longer name than any before
// widens its column from that row on, and a later shorter one does not narrow it back.
func TestTaskWatchColumnsOnlyWiden(t *testing.T) {
	row := func(account, id string) []string {
		return taskRow{Account: account, ID: id, Capability: "video.short", Status: "queued", CreatedAt: time.Now()}.cells()
	}
	var out bytes.Buffer
	table := newWatchTable(&out)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(table.print(row("acme", "vt-1"), row("a-much-longer-account-name", "vt-2")))
	listing := out.String()
	if bad := misaligned(listing); len(bad) > 0 {
		t.Errorf("the first listing does not line up:\n%s", listing)
	}
	must(table.print(row("acme", "a-task-with-a-long-generated-name-0123456789")))
	must(table.print(row("acme", "vt-3")))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("printed %d lines, want 5:\n%s", len(lines), out.String())
	}
	if last, widened := columnStarts(lines[4]), columnStarts(lines[3]); !slices.Equal(last, widened) {
		t.Errorf("a shorter ID narrowed the columns back:\n%s", out.String())
	}
	if got, want := columnStarts(lines[3])[1], columnStarts(lines[0])[1]; got != want {
		t.Errorf("ID moved from column %d to %d:\n%s", want, got, out.String())
	}
}
