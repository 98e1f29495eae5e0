package apiserver_test

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func sleepSecond() { time.Sleep(1100 * time.Millisecond) }

// keysOf is the shape of a JSON object: its keys, sorted.
func keysOf(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
