package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// terminalSafe writes untrusted text (a top-up's note, anything a user of the cluster wrote)
// for a terminal: a control, format or otherwise unprintable character prints escaped, as
// Go would quote it (\x1b, \r, \n, \t, \u202e), so that no escape sequence (ESC [ …, OSC 8
// hyperlinks, a carriage return over the line, a right-to-left override) reaches the terminal
// raw and no line break or tab forges a row or a column of the table. kubectl escapes ESC and
// \r likewise in what it prints; this goes further because a table's columns are tabs and its
// rows lines. Printable text, spaces (a no-break space too) and backslashes included, prints as it is;
// invalid UTF-8 prints as U+FFFD.
func terminalSafe(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unsafeForTerminal) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !unsafeForTerminal(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r) // e.g. '\x1b', '\u202e', '\ufffd' for invalid UTF-8
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// terminalSafeLines is terminalSafe for text of several lines (an error): its line breaks and
// tabs print as they are, everything else as terminalSafe prints it.
func terminalSafeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		cells := strings.Split(line, "\t")
		for j, cell := range cells {
			cells[j] = terminalSafe(cell)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}

func unsafeForTerminal(r rune) bool {
	return !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r)
}

// escapeRawJSON writes as \uXXXX escapes the characters encoding/json leaves raw in strings
// that the YAML printer's parser refuses ("yaml: control characters are not allowed"): DEL,
// the C1 controls (U+0080–U+009F), the byte-order mark and U+FFFE/U+FFFF; and, for -o json,
// every other character terminalSafe escapes (U+202E, a zero-width space), which encoding/json
// leaves raw too. The JSON means the same; without it a note holding one made `account show
// -o yaml` fail, and -o json wrote a C1 control (U+009B is an escape sequence's start) raw to
// the terminal. Outside strings JSON is ASCII, so every such character is inside a string.
// A character beyond U+FFFF is escaped as its UTF-16 surrogate pair, as JSON spells it.
func escapeRawJSON(raw []byte) []byte {
	if !bytes.ContainsFunc(raw, escapedInJSON) {
		return raw
	}
	var b bytes.Buffer
	for _, r := range string(raw) {
		if !escapedInJSON(r) {
			b.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.Bytes()
}

// escapedInJSON is a character escapeRawJSON escapes; encoding/json escapes those below DEL.
func escapedInJSON(r rune) bool {
	return refusedByYAML(r) || (r > 0x7f && unsafeForTerminal(r))
}

func refusedByYAML(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfeff || r == 0xfffe || r == 0xffff
}
