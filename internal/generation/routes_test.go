package generation_test

import (
	"testing"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/httpbackend"
)

// AtServer finds a backend by the server it talks to, the same one on every call when two
// entries share a url (map order would pick either, and their tokens may differ).
func TestRoutesAtServer(t *testing.T) {
	client := func(url string) generation.Backend {
		c, err := httpbackend.New(httpbackend.Config{BaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	east, west, other := client("http://gpu:8080"), client("http://gpu:8080/"), client("http://gpu:8080/other")
	routes := generation.Routes{
		videogenv1alpha1.CapabilityShort:    generation.Named{Name: "gpu-west", Backend: west},
		videogenv1alpha1.CapabilityEraser:   generation.Named{Name: "gpu-east", Backend: east},
		videogenv1alpha1.CapabilityTemplate: generation.Named{Name: "gpu-other", Backend: other},
	}
	for range 20 {
		if name, b, ok := routes.AtServer("http://gpu:8080"); !ok || b != east || name != "gpu-east" {
			t.Fatalf("AtServer(http://gpu:8080) = %q, %v, %v; want gpu-east's backend", name, b, ok)
		}
	}
	if name, b, ok := routes.AtServer("http://gpu:8080/other"); !ok || b != other || name != "gpu-other" {
		t.Fatalf("AtServer(http://gpu:8080/other) = %q, %v, %v; want gpu-other's backend", name, b, ok)
	}
	if _, _, ok := routes.AtServer("http://gpu:9090"); ok {
		t.Fatal("AtServer found a backend for a server none talks to")
	}
}
