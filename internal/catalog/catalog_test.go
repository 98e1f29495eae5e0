package catalog_test

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// A ShortTemplate's object name is a template reference for kubectl users only: the REST
// API documents official Template names and ushort_ ids, and its tasks are run as quoted.
func TestObjectNamesResolveOnlyForKubectlTasks(t *testing.T) {
	official := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "beach-dance"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, Price: ptr.To[int64](30),
			MediaURL: "https://cdn.example.com/beach.mp4"}}
	mine := &videogenv1alpha1.ShortTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "ushort-abc",
			Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: "ushort_abc"}},
		Spec:   videogenv1alpha1.ShortTemplateSpec{DisplayName: "Mine", TargetURL: "https://cdn.example.com/mine.mp4"},
		Status: videogenv1alpha1.ShortTemplateStatus{ID: "ushort_abc"},
	}
	// A ShortTemplate named like the official Template: the official one comes first.
	namesake := &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "beach-dance"},
		Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: "Namesake", TargetURL: "https://cdn.example.com/namesake.mp4"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(official, mine, namesake).Build()
	ctx := context.Background()

	for _, tc := range []struct {
		ref, kubectlMedia, restMedia string // "" for not found
	}{
		{"beach-dance", "https://cdn.example.com/beach.mp4", "https://cdn.example.com/beach.mp4"},
		{"ushort_abc", "https://cdn.example.com/mine.mp4", "https://cdn.example.com/mine.mp4"},
		{"ushort-abc", "https://cdn.example.com/mine.mp4", ""},
		{"no-such-template", "", ""},
	} {
		for _, resolve := range []struct {
			name  string
			fn    func(context.Context, client.Reader, string, videogenv1alpha1.Capability, string) (catalog.Template, error)
			media string
		}{
			{"ResolveWithObjectNames", catalog.ResolveWithObjectNames, tc.kubectlMedia},
			{"Resolve", catalog.Resolve, tc.restMedia},
		} {
			got, err := resolve.fn(ctx, c, "acme", videogenv1alpha1.CapabilityShort, tc.ref)
			switch {
			case resolve.media == "" && !errors.Is(err, catalog.ErrTemplateNotFound):
				t.Errorf("%s(%q) = %+v, %v; want ErrTemplateNotFound", resolve.name, tc.ref, got, err)
			case resolve.media != "" && (err != nil || got.MediaURL != resolve.media):
				t.Errorf("%s(%q) = %+v, %v; want media %s", resolve.name, tc.ref, got, err, resolve.media)
			}
		}
	}

	// A ushort_ id the account does not have (none, or another account's) is not found for
	// every capability: "is for video.short" would say that such a template exists.
	for _, ns := range []string{"acme", "other"} {
		for _, id := range []string{"ushort_none", "ushort_abc"} {
			if ns == "acme" && id == "ushort_abc" {
				continue
			}
			if _, err := catalog.Resolve(ctx, c, ns, videogenv1alpha1.CapabilityPose, id); !errors.Is(err, catalog.ErrTemplateNotFound) {
				t.Errorf("Resolve(%s, pose, %s) = %v; want ErrTemplateNotFound", ns, id, err)
			}
		}
	}
	// The account's own ushort_ id for another capability is the wrong capability.
	var wrong *catalog.WrongCapabilityError
	if _, err := catalog.Resolve(ctx, c, "acme", videogenv1alpha1.CapabilityPose, "ushort_abc"); !errors.As(err, &wrong) {
		t.Errorf("Resolve(acme, pose, ushort_abc) = %v; want WrongCapabilityError", err)
	}

	// An object name is not a wrong capability for REST either: it names nothing.
	if _, err := catalog.Resolve(ctx, c, "acme", videogenv1alpha1.CapabilityPose, "ushort-abc"); !errors.Is(err, catalog.ErrTemplateNotFound) {
		t.Errorf("Resolve(pose, object name) = %v; want ErrTemplateNotFound", err)
	}
}

// A Template made without the media its capability needs, before the schema required it, is no
// template to run a task on: it resolves as not found, so nothing is frozen for a task that
// could only fail at the backend.
func TestATemplateWithoutItsMediaResolvesToNothing(t *testing.T) {
	bare := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "bare"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Bare"}}
	eraser := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "clean"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityEraser, DisplayName: "Clean"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(bare, eraser).Build()
	if _, err := catalog.Resolve(context.Background(), c, "acme", videogenv1alpha1.CapabilityShort, "bare"); !errors.Is(err, catalog.ErrTemplateNotFound) {
		t.Errorf("a video.short template without media: %v, want ErrTemplateNotFound", err)
	}
	if _, err := catalog.Resolve(context.Background(), c, "acme", videogenv1alpha1.CapabilityEraser, "clean"); err != nil {
		t.Errorf("an eraser template needs no media: %v", err)
	}
}
