package main

import (
	"bytes"
	"testing"
)

// Views (account show, topup, apikey, connectors, version) print JSON as kubectl and the task
// commands do: indented by 4 spaces.
func TestViewsPrintJSONAsKubectl(t *testing.T) {
	var out bytes.Buffer
	o := &options{output: "json", out: &out}
	view := map[string]any{"account": "acme", "holds": []map[string]string{{"task": "vt-1"}}}
	if err := o.print(view, nil); err != nil {
		t.Fatal(err)
	}
	want := `{
    "account": "acme",
    "holds": [
        {
            "task": "vt-1"
        }
    ]
}
`
	if out.String() != want {
		t.Errorf("-o json printed\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	o.output = "yaml"
	if err := o.print(view, nil); err != nil || out.String() != "account: acme\nholds:\n- task: vt-1\n" {
		t.Errorf("-o yaml printed %q, %v", out.String(), err)
	}
}
