package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/worker/jobs"
)

// The worker shares its table by the task's account (task.namespace): an account past
// --max-per-account is answered 503 busy while another account's stage is taken.
func TestAnAccountPastItsShareIsBusyWhileAnotherIsTaken(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	table := jobs.New(ctx, jobs.Config{MaxConcurrent: 1, MaxQueued: 8, MaxPerOwner: 2, TTL: time.Hour})
	srv := httptest.NewServer(New(instant{}, table, Auth{Disabled: true}, nil).Handler())
	t.Cleanup(func() { srv.Close(); stop(); table.Wait() })
	submit := func(ns, name string) (int, map[string]any) {
		body := fmt.Sprintf(`{"key":"%s/%s/uid/analyze","capability":"slow","stage":"analyze","task":{"namespace":%q,"name":%q}}`, ns, name, ns, name)
		return call(t, "POST", srv.URL+"/v1/stages", "", body)
	}
	for _, name := range []string{"t1", "t2"} {
		if code, body := submit("acme", name); code != 201 {
			t.Fatalf("acme's %s: %d %v", name, code, body)
		}
	}
	if code, body := submit("acme", "t3"); code != 503 || errorCode(body) != "busy" {
		t.Errorf("acme's third stage with 2 allowed an account: %d %v, want 503 busy", code, body)
	}
	if code, body := submit("globex", "t1"); code != 201 {
		t.Errorf("another account's stage: %d %v, want 201", code, body)
	}
}
