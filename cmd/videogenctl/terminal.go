package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
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

func unsafeForTerminal(r rune) bool {
	return !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r)
}

// escapeRawJSON writes as \uXXXX escapes the characters encoding/json leaves raw in strings
// that the YAML printer's parser refuses ("yaml: control characters are not allowed"): DEL,
// the C1 controls (U+0080–U+009F), the byte-order mark and U+FFFE/U+FFFF. The JSON means the
// same; without it a note holding one made `account show -o yaml` fail, and -o json wrote
// a C1 control (U+009B is an escape sequence's start) raw to the terminal. Outside strings
// JSON is ASCII, so every such character is inside a string.
func escapeRawJSON(raw []byte) []byte {
	if !bytes.ContainsFunc(raw, refusedByYAML) {
		return raw
	}
	var b bytes.Buffer
	for _, r := range string(raw) {
		if refusedByYAML(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.Bytes()
}

func refusedByYAML(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfeff || r == 0xfffe || r == 0xffff
}
