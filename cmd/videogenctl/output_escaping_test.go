package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	sigsyaml "sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// The rest of videogenctl (account show's escaping is in terminal_notes_test.go): every other
// command that
// prints text someone else wrote.

// hostileText clears the line, hides a link behind "pay here" (OSC 8), rewrites the line (\r)
// and forges a row (\n, tabs); U+202E reverses what follows, U+009B is an 8-bit CSI.
const hostileText = "ok\r\x1b[2K\x1b]8;;https://evil.example/\x1b\\pay here\x1b]8;;\x1b\\\nvt-forged\tSucceeded\t100%\u202e\u009b31m"

// hostileEscaped is hostileText as terminalSafe prints it.
const hostileEscaped = `ok\r\x1b[2K\x1b]8;;https://evil.example/\x1b\pay here\x1b]8;;\x1b\\nvt-forged\tSucceeded\t100%\u202e\u009b31m`

func requireNoRawControls(t *testing.T, what, got string) {
	t.Helper()
	var raw []string
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u009b", "\x7f"} {
		if strings.Contains(got, bad) {
			raw = append(raw, bad)
		}
	}
	if len(raw) > 0 {
		t.Errorf("%s printed %q raw:\n%q", what, raw, got)
	}
}

func hostileTasks() (succeeded, failed *videogenv1alpha1.VideoTask) {
	created := metav1.NewTime(time.Now().Add(-time.Minute))
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "acme", Name: name, CreationTimestamp: created}
	}
	cost := int64(5)
	succeeded = &videogenv1alpha1.VideoTask{ObjectMeta: meta("vt-ok"),
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskSucceeded, Charge: videogenv1alpha1.ChargeDeducted, Cost: &cost, Progress: 100,
			Stages: []videogenv1alpha1.StageStatus{
				{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Progress: 100, Backend: "gpu\x1b[8m", Message: hostileText},
				{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageSucceeded, Progress: 100, Backend: "gpu", Message: "fertig, 日本 ✓"},
			},
			Result: &videogenv1alpha1.TaskResult{URL: "https://cdn.example/v.mp4\x1b]8;;https://evil.example/\x1b\\\nRESULT\thttps://evil.example/v.mp4"}}}
	failed = &videogenv1alpha1.VideoTask{ObjectMeta: meta("vt-failed"),
		Spec: videogenv1alpha1.VideoTaskSpec{Capability: videogenv1alpha1.CapabilityEraser},
		Status: videogenv1alpha1.VideoTaskStatus{Phase: videogenv1alpha1.TaskFailed, Charge: videogenv1alpha1.ChargeRefunded, Cost: &cost,
			Stages: []videogenv1alpha1.StageStatus{
				{Name: videogenv1alpha1.StageAnalyze, State: videogenv1alpha1.StageSucceeded, Progress: 100},
				{Name: videogenv1alpha1.StageRender, State: videogenv1alpha1.StageFailed, Message: hostileText},
			},
			Error: &videogenv1alpha1.TaskError{Code: "stage_failed\x1b[0m", Message: hostileText}}}
	return succeeded, failed
}

// A backend's words reach `task get` unchecked: the HTTP backend's status message becomes the
// stage's message and the task's error message, and its result URL the task's result
// (internal/generation/httpbackend). A backend that is compromised, or that echoes its
// caller's input into its errors (a tenant's prompt, a fetched page's title), wrote that text.
// `videogenctl task get` printed it raw into the administrator's terminal: the message above
// cleared the line, planted a hidden link, and forged a row and columns of the table; a result
// URL could show a second RESULT line pointing elsewhere. Each such character now prints
// escaped as in account show; printable text (non-ASCII letters, ✓) prints as it is.
func TestTaskGetEscapesWhatBackendsWrote(t *testing.T) {
	succeeded, failed := hostileTasks()
	for _, c := range []struct {
		task  *videogenv1alpha1.VideoTask
		lines int // task header and row, blank, stage header and two stages, blank, result or error
		want  []string
	}{
		{succeeded, 8, []string{hostileEscaped, `gpu\x1b[8m`, "fertig, 日本 ✓",
			`https://cdn.example/v.mp4\x1b]8;;https://evil.example/\x1b\\nRESULT\thttps://evil.example/v.mp4`}},
		{failed, 8, []string{`stage_failed\x1b[0m: ` + hostileEscaped}},
	} {
		var out bytes.Buffer
		if err := taskDetails(&out, c.task); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		requireNoRawControls(t, "task get "+c.task.Name, got)
		if n := strings.Count(got, "\n"); n != c.lines {
			t.Errorf("task get %s printed %d lines, want %d (a row forged?):\n%s", c.task.Name, n, c.lines, got)
		}
		for _, want := range c.want {
			if !strings.Contains(got, want) {
				t.Errorf("task get %s lacks %q:\n%s", c.task.Name, want, got)
			}
		}
	}
}

// `task watch NAME` ends, for a task that failed, with the error "task vt-failed failed
// (CODE: MESSAGE)", which main prints on stderr: the backend's message above reached the
// terminal raw there too, and its \n forged a second "videogenctl: …" line. It prints escaped,
// on one line.
func TestTaskWatchOutcomeEscapesTheBackendsMessage(t *testing.T) {
	_, failed := hostileTasks()
	var out bytes.Buffer
	printError(&out, outcome(failed, nil))
	got := out.String()
	requireNoRawControls(t, "task watch's error", got)
	if n := strings.Count(got, "\n"); n != 1 {
		t.Errorf("task watch's error takes %d lines, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, hostileEscaped) {
		t.Errorf("task watch's error lacks %q:\n%s", hostileEscaped, got)
	}
}

// main prints every error a command returns, and many quote the kube-apiserver, whose
// messages may quote what someone wrote: a validating admission webhook's or policy's denial
// ("note \"…\" is not allowed"), a conflict naming a field's value, the ledger's refusal
// message of a top-up (status.conditions, which anyone allowed to write the status sets). The
// error line now escapes as account show does, except the line breaks and tabs that cobra's own
// errors use ("Did you mean this?\n\t…"), so no escape sequence reaches the terminal.
func TestErrorsAreEscaped(t *testing.T) {
	denied := apierrors.NewForbidden(videogenv1alpha1.GroupVersion.WithResource("pointtopups").GroupResource(), "t-1",
		errors.New("denied"))
	denied.ErrStatus.Message = "admission webhook denied the request: note " + hostileText
	var out bytes.Buffer
	printError(&out, denied)
	requireNoRawControls(t, "the error line", out.String())
	if !strings.Contains(out.String(), "note ok\\r\\x1b[2K") {
		t.Errorf("the error line lacks the escaped note: %s", out.String())
	}
	out.Reset()
	cobraLike := "unknown command \"tsk\" for \"videogenctl\"\n\nDid you mean this?\n\ttask\n"
	printError(&out, &exitError{code: 1, err: errorString(cobraLike)})
	if want := "videogenctl: " + cobraLike + "\n"; out.String() != want {
		t.Errorf("cobra's error printed as %q, want %q", out.String(), want)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// `apikey list` printed a key's description raw: the videogen.dev/description annotation of
// its Secret, which anyone who may edit Secrets in the operator's namespace writes (a
// provisioning script fed from a ticket's title, say). A description with a newline and tabs
// forged a key row: an administrator looking for keys to revoke sees one that does not exist
// and misses the one that does. It prints escaped; -o json and -o yaml carry it exactly.
func TestAPIKeyListEscapesDescriptions(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	keys := []keyView{
		{Key: apikeys.Key{ID: "k1", Account: "acme", Description: "ci\n" + "k9\tacme\t2026-01-01T00:00:00Z\tproduction\x1b[8m", CreatedAt: created}},
		{Key: apikeys.Key{ID: "k2", Account: "acme", Description: "Grüße, C:\\keys", CreatedAt: created}},
	}
	var out bytes.Buffer
	o := &options{out: &out}
	if err := o.print(keys, func(w io.Writer) { keysTable(w, keys) }); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	requireNoRawControls(t, "apikey list", got)
	if n := strings.Count(got, "\n"); n != 3 {
		t.Errorf("apikey list printed %d lines, want 3 (a description forged a row?):\n%s", n, got)
	}
	for _, want := range []string{`ci\nk9\tacme\t2026-01-01T00:00:00Z\tproduction\x1b[8m`, `Grüße, C:\keys`} {
		if !strings.Contains(got, want) {
			t.Errorf("apikey list lacks %q:\n%s", want, got)
		}
	}
}

// The task commands' -o json and -o yaml (task get, list, watch, cancel) print through
// kubectl's printers, which had the fault account show had: -o yaml failed outright ("yaml:
// control characters are not allowed") for a task whose backend's message, result URL or
// error holds DEL or a C1 control, so the administrator could not read the task in YAML (task
// list -o yaml failed for the whole account while the task was in the listing), and -o json
// wrote the C1 control raw. -o kyaml too. They now carry such characters as \uXXXX escapes, and
// -o json U+202E and the other invisible formatting characters likewise; each reads back as
// written. A task without such text prints exactly as kubectl's printer prints it.
func TestTaskMachineFormatsCarryControlCharacters(t *testing.T) {
	succeeded, failed := hostileTasks()
	c1 := "render\x7f failed\u0085\u009b31m\ufeff"
	failed.Status.Error.Message = c1
	failed.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager"}}
	for _, format := range []string{"json", "yaml", "kyaml"} {
		o := &options{output: format}
		p, err := o.objectPrinter()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := p.PrintObj(failed.DeepCopy(), &out); err != nil {
			t.Errorf("task get -o %s: %v", format, err)
			continue
		}
		got := out.String()
		if strings.ContainsAny(got, "\x7f\u009b\u0085") {
			t.Errorf("task get -o %s printed a C1 control raw:\n%q", format, got)
		}
		if format == "json" && strings.Contains(got, "\u202e") {
			t.Errorf("task get -o json printed U+202E raw:\n%q", got)
		}
		if strings.Contains(got, "managedFields") || !strings.Contains(got, "kind") {
			t.Errorf("task get -o %s: managedFields shown or kind missing:\n%s", format, got)
		}
		var back videogenv1alpha1.VideoTask
		if err := sigsyaml.Unmarshal(out.Bytes(), &back); err != nil {
			t.Errorf("task get -o %s: reading it back: %v\n%s", format, err, got)
			continue
		}
		if back.Status.Error == nil || back.Status.Error.Message != c1 || back.Status.Stages[1].Message != hostileText {
			t.Errorf("task get -o %s: the texts read back as %+v, want %q and %q", format, back.Status, c1, hostileText)
		}

		// A listing, and a watch's objects one after the other (YAML separates them with ---).
		out.Reset()
		if p, err = o.objectPrinter(); err != nil {
			t.Fatal(err)
		}
		list := &videogenv1alpha1.VideoTaskList{Items: []videogenv1alpha1.VideoTask{*failed, *succeeded}}
		if err := p.PrintObj(list, &out); err != nil {
			t.Errorf("task list -o %s: %v", format, err)
		}
		if err := p.PrintObj(succeeded.DeepCopy(), &out); err != nil {
			t.Errorf("task watch -o %s, the second object: %v", format, err)
		}
		if format == "yaml" && strings.Count(out.String(), "---\n") != 1 {
			t.Errorf("task watch -o yaml: want one --- between its objects:\n%s", out.String())
		}
	}
}

// Checked, holds after the fix: a task without control characters prints in -o json and -o
// yaml exactly as kubectl's own printers print it.
func TestTaskMachineFormatsAsKubectlForPlainText(t *testing.T) {
	succeeded, _ := hostileTasks()
	succeeded.Status.Stages[0].Message = "done"
	succeeded.Status.Stages[0].Backend = "gpu"
	succeeded.Status.Result.URL = "https://cdn.example/v.mp4"
	succeeded.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager"}}
	for _, format := range []string{"json", "yaml", "kyaml"} {
		o := &options{output: format}
		p, err := o.objectPrinter()
		if err != nil {
			t.Fatal(err)
		}
		var got, want bytes.Buffer
		if err := p.PrintObj(succeeded.DeepCopy(), &got); err != nil {
			t.Fatal(err)
		}
		if err := kubectlPrinter(t, format).PrintObj(succeeded.DeepCopy(), &want); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("-o %s printed\n%s\nkubectl prints\n%s", format, got.String(), want.String())
		}
	}
}

// kubectlPrinter is the printer kubectl (and videogenctl before it escaped what others wrote) prints objects with.
func kubectlPrinter(t *testing.T, format string) printers.ResourcePrinter {
	flags := genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.New())
	flags.OutputFormat = &format
	p, err := flags.ToPrinter()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// escapeRawJSON escapes what -o json would write raw to the terminal beyond the C1 controls
// (U+202E, a zero-width space, a tag character beyond U+FFFF as its surrogate pair, as JSON
// spells it) and keeps printable text, an emoji beyond U+FFFF included; it decodes to the same.
func TestEscapeRawJSONSpellsInvisibleCharactersAsJSON(t *testing.T) {
	in := "rlo\u202e zw\u200b tag\U000E0001 emoji\U0001F600 ü"
	raw, err := json.Marshal(map[string]string{"note": in})
	if err != nil {
		t.Fatal(err)
	}
	got := string(escapeRawJSON(raw))
	if want := `{"note":"rlo\u202e zw\u200b tag\udb40\udc01 emoji` + "\U0001F600 ü" + `"}`; got != want {
		t.Errorf("escapeRawJSON = %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["note"] != in {
		t.Errorf("it decodes to %q (%v), want %q", back["note"], err, in)
	}
}
