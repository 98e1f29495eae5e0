package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// -o's help says which command takes name. Before, it ended "the task commands also name", which
// reads as the task commands naming something; a user found no -o name in it and tried it on
// account show (refused) or never on task list (taken). No cluster: help reads none.
func TestOutputHelpSaysWhoTakesName(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"task", "list", "--help"}, &out); err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(out.String()) {
		if strings.Contains(l, "--output") {
			line = l
		}
	}
	if !strings.Contains(line, "name (the task commands only)") {
		t.Errorf("-o's help: %q; want it to say that name is the task commands' only", line)
	}
}
