package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// invisibleText is what YAML's emitter counts as printable but a terminal does not show as
// it is: U+202E reverses what follows ("txt.exe" shows as "exe.txt"), U+2066/U+2069 isolate a
// run, U+200B, U+2060 and U+00AD show as nothing, U+E000 is a private-use character, U+2028 a
// line separator. Plus a quote, a backslash, a tab and a line break, which the quoting must
// keep, and a colon, which plain YAML would misread.
const invisibleText = "Rechnung \u202eFDP.exe\u202c \u2066ltr\u2069 zero\u200bwidth\u2060\u00ad \ue000 \"q\" \\ a\tb\nc: d \u2028end"

// rawForTerminal lists the characters terminalSafe escapes that out holds raw (a line break is
// YAML's own; KYAML writes a tab in a string as it is, which forges no table's column here).
func rawForTerminal(out string) []string {
	var raw []string
	for _, r := range out {
		if r != '\n' && r != '\t' && unsafeForTerminal(r) {
			raw = append(raw, fmt.Sprintf("%U", r))
		}
	}
	return raw
}

// `videogenctl account show -o yaml` and `task get -o yaml` printed a top-up's note
// or a backend's message holding U+202E, a zero-width space or another invisible formatting
// character raw: -o json escaped them (as \u202e, output_escaping_test.go) and kyaml escapes them, but
// kubectl's YAML printer re-emits the decoded string, and YAML's emitter counts every such
// character printable, so it wrote them to the terminal as they are (the note
// "Rechnung \u202eFDP.exe" shows as "Rechnung exe.PDF"; a zero-width space makes two
// references that print the same). Whoever may create a top-up (its note) or runs a backend
// (its messages) wrote that text. -o yaml now writes a string holding one double-quoted, with
// each such character as a YAML escape (\u202E); it reads back exactly as written, and a
// string without one prints as before.
func TestYAMLOutputEscapesInvisibleCharacters(t *testing.T) {
	v := accountView{Account: "acme", Holds: []holdView{},
		RecentTop: []topUpView{{Name: "t-1", Amount: 5, Reference: "INV-1", Note: invisibleText}, {Name: "t-2", Amount: 7, Reference: "INV-2", Note: "plain: note"}}}
	for _, format := range []string{"yaml", "json"} {
		var out bytes.Buffer
		o := &options{out: &out, output: format}
		if err := o.print(v, v.table); err != nil {
			t.Fatalf("account show -o %s: %v", format, err)
		}
		if raw := rawForTerminal(out.String()); len(raw) > 0 {
			t.Errorf("account show -o %s printed %+q raw:\n%s", format, raw, out.String())
		}
		var back accountView
		if err := sigsyaml.Unmarshal(out.Bytes(), &back); err != nil {
			t.Fatalf("account show -o %s: reading it back: %v\n%s", format, err, out.String())
		}
		if len(back.RecentTop) != 2 || back.RecentTop[0].Note != invisibleText || back.RecentTop[1].Note != "plain: note" {
			t.Errorf("account show -o %s: the notes read back as %+v", format, back.RecentTop)
		}
		if format == "yaml" && !strings.Contains(out.String(), "note: 'plain: note'\n") {
			t.Errorf("account show -o yaml: a note without such a character no longer prints as kubectl's printer prints it:\n%s", out.String())
		}
	}

	succeeded, failed := hostileTasks()
	failed.Status.Error.Message = invisibleText
	for _, format := range []string{"yaml", "kyaml", "json"} {
		o := &options{output: format}
		p, err := o.objectPrinter()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		list := &videogenv1alpha1.VideoTaskList{Items: []videogenv1alpha1.VideoTask{*failed, *succeeded}}
		if err := p.PrintObj(list, &out); err != nil {
			t.Fatalf("task list -o %s: %v", format, err)
		}
		if err := p.PrintObj(failed.DeepCopy(), &out); err != nil {
			t.Fatalf("task watch -o %s, the second object: %v", format, err)
		}
		got := out.String()
		if raw := rawForTerminal(got); len(raw) > 0 {
			t.Errorf("task list -o %s printed %+q raw:\n%s", format, raw, got)
		}
		if format != "yaml" {
			continue
		}
		docs := strings.Split(got, "---\n")
		if len(docs) != 2 {
			t.Fatalf("task watch -o yaml: want one --- between its objects:\n%s", got)
		}
		var back videogenv1alpha1.VideoTask
		if err := sigsyaml.Unmarshal([]byte(docs[1]), &back); err != nil {
			t.Fatalf("task get -o yaml: reading it back: %v\n%s", err, docs[1])
		}
		if back.Status.Error == nil || back.Status.Error.Message != invisibleText || back.Status.Stages[1].Message != hostileText {
			t.Errorf("task get -o yaml: the texts read back as %+v, want %+q and %+q", back.Status, invisibleText, hostileText)
		}
	}
}
