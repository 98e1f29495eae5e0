package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestBoundingSetReadsCapBnd(t *testing.T) {
	status := filepath.Join(t.TempDir(), "status")
	// The CI machines' set: every capability up to CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE.
	if err := os.WriteFile(status, []byte("Name:\tx\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := boundingSet(status)
	if err != nil {
		t.Fatal(err)
	}
	if set["CAP_SYS_RESOURCE"] {
		t.Error("CAP_SYS_RESOURCE (bit 24) is not in 000001fffeffffff")
	}
	for _, name := range []string{"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_TIME", "CAP_CHECKPOINT_RESTORE"} {
		if !set[name] {
			t.Errorf("%s should be grantable", name)
		}
	}
}

func TestSpecFilesOfCreateAndExec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--root", "/run/r", "create", "--bundle", "/b", "id"}, []string{"/b/config.json"}},
		{[]string{"run", "--bundle=/b", "id"}, []string{"/b/config.json"}},
		{[]string{"--log", "/l", "exec", "--process", "/tmp/p.json", "--detach", "id"}, []string{"/tmp/p.json"}},
		{[]string{"state", "id"}, nil},
	} {
		if got := specFiles(tc.args); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("specFiles(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestDropUngrantableKeepsTheRestOfTheSpec(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.json")
	spec := `{"ociVersion":"1.0.2","process":{"capabilities":{
		"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_FUTURE_THING"],
		"effective":["CAP_SYS_RESOURCE"]}},
		"linux":{"resources":{"memory":{"limit":9223372036854775807}}}}`
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	grantable := map[string]bool{"CAP_CHOWN": true}
	if err := dropUngrantable(file, grantable); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Process struct {
			Capabilities map[string][]string
		}
		Linux struct {
			Resources struct{ Memory struct{ Limit json.Number } }
		}
	}
	raw, _ := os.ReadFile(file)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"bounding": {"CAP_CHOWN", "CAP_FUTURE_THING"}, "effective": {}}
	if !reflect.DeepEqual(got.Process.Capabilities, want) {
		t.Errorf("capabilities = %v, want %v", got.Process.Capabilities, want)
	}
	if got.Linux.Resources.Memory.Limit != "9223372036854775807" {
		t.Errorf("memory limit = %s: a 64-bit number must survive exactly", got.Linux.Resources.Memory.Limit)
	}
}

func TestDropUngrantableOnAnExecProcessFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "process.json")
	if err := os.WriteFile(file, []byte(`{"args":["sh"],"capabilities":{"permitted":["CAP_SYS_RESOURCE","CAP_KILL"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := dropUngrantable(file, map[string]bool{"CAP_KILL": true}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(file)
	var got struct{ Capabilities map[string][]string }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"CAP_KILL"}; !reflect.DeepEqual(got.Capabilities["permitted"], want) {
		t.Errorf("permitted = %v, want %v", got.Capabilities["permitted"], want)
	}
}
