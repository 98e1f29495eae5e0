// Command crddoc rewrites the descriptions in the CRDs controller-gen generated so that
// `kubectl explain` shows them as prose: controller-gen keeps the line breaks of the Go
// comments they come from, and kubectl prints those breaks mid-sentence. Lines of a paragraph
// are joined; blank lines (paragraphs) and list items stay on lines of their own. An array's
// items lose their description when the array has one (it is their type's Go doc).
//
// Usage: go run ./hack/crddoc config/crd/bases/*.yaml
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crddoc: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	walk(doc)
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	out = append([]byte("---\n"), out...) // as controller-gen writes them
	if bytes.Equal(out, raw) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// walk rewrites every "description" string under v, and drops the description of an array's
// items when the array has one of its own: kubectl explain prints both, and the items' is the Go
// doc of their type ("StageStatus is …", "Condition contains …"), which names a Go type.
func walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		if items, ok := v["items"].(map[string]any); ok && v["type"] == "array" && v["description"] != nil {
			delete(items, "description")
		}
		for k, e := range v {
			if s, ok := e.(string); ok && k == "description" {
				v[k] = Unwrap(s)
				continue
			}
			walk(e)
		}
	case []any:
		for _, e := range v {
			walk(e)
		}
	}
}

// listItem matches a line that starts a list item: "- x", "* x" or "1. x".
var listItem = regexp.MustCompile(`^\s*([-*]|\d+\.)\s`)

// Unwrap joins the lines of each paragraph of s with spaces.
func Unwrap(s string) string {
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, line := range lines {
		line = strings.TrimRight(line, " \t")
		switch {
		case i == 0:
		case line == "" || lines[i-1] == "" || listItem.MatchString(line):
			b.WriteString("\n")
		default:
			b.WriteString(" ")
			line = strings.TrimLeft(line, " \t")
		}
		b.WriteString(line)
	}
	return b.String()
}
