package main

import (
	"os"
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// client-go reads KUBE_FEATURE_* once per process, at the first question: this test, or a test
// that calls preferPagedLists first, as main does.
func TestPreferPagedListsTurnsWatchListOff(t *testing.T) {
	t.Setenv(watchListEnv, "") // restored afterwards
	if err := os.Unsetenv(watchListEnv); err != nil {
		t.Fatal(err)
	}
	preferPagedLists()
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Errorf("client-go still uses watch-lists")
	}

	t.Setenv(watchListEnv, "true")
	preferPagedLists()
	if got := os.Getenv(watchListEnv); got != "true" {
		t.Errorf("%s = %q, want the operator's explicit true kept", watchListEnv, got)
	}
}
