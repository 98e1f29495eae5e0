package main

import (
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
