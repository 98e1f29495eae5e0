package httpbackend

import "testing"

// Checked, holds: the server a stage's status records (stages[].server, readable by
// the task's namespace) is the base URL without credentials, and changes with the host, so a
// url edited under the same backend name reads as another server.
func TestServerIsTheBaseURLWithoutUserInfo(t *testing.T) {
	for base, want := range map[string]string{
		"http://worker-a.videogen.svc:8080/":          "http://worker-a.videogen.svc:8080",
		"https://user:secret@gpu.example/v?token=x#f": "https://gpu.example/v",
	} {
		c, err := New(Config{BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Server(); got != want {
			t.Errorf("Server() of %q = %q, want %q", base, got, want)
		}
	}
}
