package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// studioTemplate is an official video.short template, "studio", with its media.
func studioTemplate() *videogenv1alpha1.Template {
	return &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "studio"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Studio",
			MediaURL: "https://cdn.example/studio.mp4"}}
}
