package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every flag main registers is in the README's "Manager flags" table: a flag missing there is
// one an operator cannot find (the metrics flags were, and metrics are off by default).
func TestTheReadmeListsEveryManagerFlag(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "## Manager flags")
	table, _, _ = strings.Cut(table, "\n## ")
	registered := regexp.MustCompile(`flag\.\w+Var\([^,]+,\s*"([a-z0-9-]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(registered) < 10 {
		t.Fatalf("found %d flags in main.go: the pattern no longer matches how flags are registered", len(registered))
	}
	for _, m := range registered {
		if !strings.Contains(table, "`--"+m[1]+"`") {
			t.Errorf("--%s is registered in cmd/manager/main.go but not in the README's Manager flags table", m[1])
		}
	}
}
