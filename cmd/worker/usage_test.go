package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// `worker --help` names the job subcommand: a reader of the server's usage alone would not
// know the image also runs the Job backend's pods.
func TestServerUsageNamesTheJobSubcommand(t *testing.T) {
	var out bytes.Buffer
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.String("bind-address", ":8080", "Address.")
	fs.Usage = usage(fs)
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(--help) = %v", err)
	}
	for _, want := range []string{"worker job [flags]", "worker job --help", "-bind-address"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("worker --help does not say %q:\n%s", want, out.String())
		}
	}
}

// A word after the flags is refused, not ignored by a server that then starts.
func TestServerRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"jobs"}, {"--bind-address=:0", "extra"}} {
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.String("bind-address", ":8080", "Address.")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := noArguments(fs); err == nil || !strings.Contains(err.Error(), "unexpected argument") {
			t.Errorf("worker %v: %v, want unexpected argument", args, err)
		}
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	if err := fs.Parse(nil); err != nil || noArguments(fs) != nil {
		t.Errorf("worker with no arguments is refused: %v", noArguments(fs))
	}
}

// `worker job --help` prints the usage and succeeds, as every other --help does; it exited 2,
// the code a Job's pod uses for inputs it cannot use.
func TestJobHelpSucceeds(t *testing.T) {
	var out bytes.Buffer
	if code := runJob([]string{"--help"}, func(string) string { return "" }, &out); code != exitOK {
		t.Errorf("worker job --help exits %d, want %d", code, exitOK)
	}
	if !strings.Contains(out.String(), "-termination-log") {
		t.Errorf("worker job --help prints no usage:\n%s", out.String())
	}
	if code := runJob([]string{"--no-such-flag"}, func(string) string { return "" }, &out); code != exitInvalidInput {
		t.Errorf("worker job --no-such-flag exits %d, want %d", code, exitInvalidInput)
	}
}
