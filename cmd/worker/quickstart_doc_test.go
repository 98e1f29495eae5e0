package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The reference worker's Quick start in docs/backend-protocol.md starts the worker with the
// token file it writes, so its curl calls must send that file's token: they sent a literal
// "Bearer dev", which the worker answers 401 (and which, at 3 bytes, no worker accepts as a
// token). They must also say that their bodies are JSON, as the protocol asks (curl -d alone
// sends application/x-www-form-urlencoded).
func TestTheQuickStartSendsTheTokenItWrote(t *testing.T) {
	doc, err := os.ReadFile("../../docs/backend-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "### Quick start")
	_, block, _ = strings.Cut(block, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	file := regexp.MustCompile(`--token-file (\S+)`).FindStringSubmatch(block)
	if file == nil {
		t.Fatal("the Quick start no longer starts the worker with --token-file")
	}
	if !strings.Contains(block, "TOKEN=$(cat "+file[1]+")") {
		t.Errorf("the Quick start does not read the token the worker was started with into $TOKEN (TOKEN=$(cat %s))", file[1])
	}
	calls := 0
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "curl ") || !strings.Contains(line, "/v1/stages") {
			continue
		}
		calls++
		if !strings.Contains(line, `-H "Authorization: Bearer $TOKEN"`) {
			t.Errorf("this call does not send the worker's token (-H \"Authorization: Bearer $TOKEN\"): %s", line)
		}
		if strings.Contains(line, " -d ") && !strings.Contains(line, "Content-Type: application/json") {
			t.Errorf("this call sends a body without Content-Type: application/json: %s", line)
		}
	}
	if calls < 3 {
		t.Errorf("found %d curl calls of /v1/stages in the Quick start, want its 3", calls)
	}
}
