package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"
)

// A top-up's spec.note is free text (the CRD bounds only its length) written by
// whoever may create PointTopUps, e.g. a billing integration fed from an invoice's memo
// field. `videogenctl account show` printed it raw into the operator's terminal, so a note
// such as
//
//	"refund\r\x1b[2K\x1b]8;;https://evil.example/\x1b\\pay here\x1b]8;;\x1b\\\n t-forged\t+999999\tINV-X"
//
// cleared the line (ESC [ 2K), hid a hyperlink behind "pay here" (OSC 8), rewrote what was
// before it (\r) and forged a whole extra top-up row (\n and tabs): the operator reading the
// account's history sees a credit that does not exist. The note (and the Ready column, and
// the reference, though the CRD already refuses control characters there) now print with
// such characters escaped as Go quotes them; printable text, including non-ASCII letters
// and backslashes, prints as it is.
func TestAccountShowEscapesTerminalSequencesInNotes(t *testing.T) {
	applied := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	hostile := "refund\r\x1b[2K\x1b]8;;https://evil.example/\x1b\\pay here\x1b]8;;\x1b\\\n t-forged\t+999999\tINV-X\u202e\u009b31m"
	v := accountView{Account: "acme", Balance: 10, Ready: "True (Ready\x1b[0m)", RecentTop: []topUpView{
		{Name: "t-debit", Amount: -5, Reference: "INV-1", AppliedAt: &applied, Note: hostile},
		{Name: "t-ok", Amount: 15, Reference: "INV-0", AppliedAt: &applied, Note: `Grüße, C:\path 日本`},
	}}
	var out bytes.Buffer
	o := &options{out: &out}
	if err := o.print(v, v.table); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u009b", "\t"} {
		if strings.Contains(got, bad) {
			t.Errorf("account show printed %q raw:\n%s", bad, got)
		}
	}
	if lines := strings.Count(got, "\n"); lines != 6 { // header, account, blank, header, two top-ups
		t.Errorf("account show printed %d lines, want 6 (a note forged a row?):\n%s", lines, got)
	}
	for _, want := range []string{
		`refund\r\x1b[2K\x1b]8;;https://evil.example/\x1b\pay here\x1b]8;;\x1b\\n t-forged\t+999999\tINV-X\u202e\u009b31m`,
		`Grüße, C:\path 日本`,
		`True (Ready\x1b[0m)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("account show output lacks %q:\n%s", want, got)
		}
	}
}

// terminalSafe keeps printable text and escapes the rest, invalid UTF-8 included.
func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"plain note":       "plain note",
		"a\x07b":           `a\ab`,
		"\x1b]0;title\x07": `\x1b]0;title\a`,
		"zero\u200bwidth":  `zero\u200bwidth`,
		"bad\xffbyte":      "bad\ufffdbyte",
		"\u00a0nbsp\u2028": "\u00a0nbsp\\u2028",
	} {
		if got := terminalSafe(in); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// `account show -o yaml` failed outright ("yaml: control characters are not
// allowed", exit 1, nothing printed) for an account one of whose newest top-ups has a note
// holding DEL or a C1 control (U+0080–U+009F), e.g. pasted from a Windows-1252 memo field:
// encoding/json writes those characters raw, and the YAML printer's parser refuses them. The
// administrator could not see the account's figures in YAML at all until that top-up fell
// out of the newest ten. -o json wrote them raw to the terminal too (U+009B starts an escape
// sequence on terminals that take 8-bit controls). Both now carry them as \uXXXX escapes:
// the value a program decodes is the note exactly as written.
func TestAccountShowMachineFormatsCarryControlCharactersInNotes(t *testing.T) {
	note := "memo\x7f\u009b31m\u0085\ufeff\ufffe end"
	v := accountView{Account: "acme", Holds: []holdView{}, RecentTop: []topUpView{{Name: "t-1", Amount: 5, Reference: "INV-1", Note: note}}}
	for _, format := range []string{"json", "yaml"} {
		var out bytes.Buffer
		o := &options{out: &out, output: format}
		if err := o.print(v, v.table); err != nil {
			t.Errorf("-o %s: %v", format, err)
			continue
		}
		if strings.ContainsAny(out.String(), "\x7f\u009b\ufffe") {
			t.Errorf("-o %s printed a control character raw: %q", format, out.String())
		}
		var back accountView
		if err := sigsyaml.Unmarshal(out.Bytes(), &back); err != nil {
			t.Errorf("-o %s: reading it back: %v\n%s", format, err, out.String())
			continue
		}
		if len(back.RecentTop) != 1 || back.RecentTop[0].Note != note {
			t.Errorf("-o %s: the note reads back as %+v, want %q", format, back.RecentTop, note)
		}
	}
}
