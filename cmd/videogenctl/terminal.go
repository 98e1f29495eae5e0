package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
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

// printYAML prints raw JSON (through escapeRawJSON) with p, kubectl's YAML printer, as
// terminalSafe would have it: YAML's emitter counts U+202E, a zero-width space, a soft hyphen
// and every other format or private-use character printable and writes it raw, even in a
// double-quoted string, and a right-to-left override or an invisible character then reaches
// the terminal as it is. Each string (a key too) holding a character terminalSafe escapes goes
// through p as a token and is then written double-quoted in place of it, with every such
// character as a YAML escape (\u202E); it reads back exactly as it was. A document without
// one prints exactly as p prints it.
func printYAML(p printers.ResourcePrinter, raw []byte, w io.Writer) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return p.PrintObj(&runtime.Unknown{Raw: raw}, w) // p says what is wrong with it
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	// A token is letters and digits, which YAML writes plain and reads as a string, and no
	// text holds by chance; the closing "z" keeps token 1 from being the start of token 10.
	prefix := fmt.Sprintf("videogenctlquoted%xn", nonce)
	var quoted []string
	var swap func(v any) any
	token := func(s string) string {
		if strings.IndexFunc(s, unsafeForTerminal) < 0 {
			return s
		}
		quoted = append(quoted, yamlDoubleQuoted(s))
		return fmt.Sprintf("%s%dz", prefix, len(quoted)-1)
	}
	swap = func(v any) any {
		switch v := v.(type) {
		case string:
			return token(v)
		case []any:
			for i := range v {
				v[i] = swap(v[i])
			}
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				out[token(k)] = swap(x)
			}
			return out
		}
		return v
	}
	doc = swap(doc)
	if len(quoted) == 0 {
		return p.PrintObj(&runtime.Unknown{Raw: raw}, w)
	}
	tokened, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := p.PrintObj(&runtime.Unknown{Raw: tokened}, &buf); err != nil {
		return err
	}
	out := buf.String()
	for i := len(quoted) - 1; i >= 0; i-- { // the longest tokens first
		out = strings.ReplaceAll(out, fmt.Sprintf("%s%dz", prefix, i), quoted[i])
	}
	_, err = io.WriteString(w, out)
	return err
}

// yamlDoubleQuoted writes s as a YAML double-quoted scalar: Go's quoting, whose escapes (\",
// \\, \n, \t, \xHH below U+0080, \uHHHH, \UHHHHHHHH) YAML's double-quoted style reads the same,
// and which escapes every character strconv.IsPrint refuses (a superset of those terminalSafe
// escapes). s is valid UTF-8 (decoded JSON), so no \xHH stands for a byte.
func yamlDoubleQuoted(s string) string {
	return strconv.Quote(s)
}
