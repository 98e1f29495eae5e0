package main

import "os"

// watchListEnv is client-go's switch for its streaming watch-list (feature WatchListClient).
const watchListEnv = "KUBE_FEATURE_WatchListClient"

// preferPagedLists makes the manager's informers start with a paged list instead of a
// watch-list, unless KUBE_FEATURE_WatchListClient is set. A watch-list ends with a bookmark
// that the kube-apiserver sends on its once-a-second bookmark timer, so every cache synced
// about a second late and every item queued by the initial list waited that long. The
// manager's caches are small (only open tasks), which is where a watch-list saves nothing:
// a restart with 1,000 running tasks reached its first reconciles in 0.1 s instead of 1.1 s
// (docs/benchmarks.md, section 3). Call it before any client is made.
func preferPagedLists() {
	if _, set := os.LookupEnv(watchListEnv); !set {
		_ = os.Setenv(watchListEnv, "false")
	}
}
