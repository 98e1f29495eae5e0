// Package catalog resolves a task's template reference (an official Template name, a
// ShortTemplate's ushort_ id, or, for tasks made with kubectl, the object name of a
// ShortTemplate in the task's namespace) to the media and pricing terms the task uses. The
// controller resolves a REST task as the REST apiserver quoted it (Resolve), so a price quoted
// at submission is the price frozen.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
)

// ErrTemplateNotFound: no template with that id is visible to the account.
var ErrTemplateNotFound = errors.New("template not found")

// WrongCapabilityError: the template exists but serves another capability.
type WrongCapabilityError struct {
	ID        string
	Template  videogenv1alpha1.Capability
	Requested videogenv1alpha1.Capability
}

func (e *WrongCapabilityError) Error() string {
	// The id is the caller's, and this message is their answer: quote it cut short.
	return fmt.Sprintf("template %s is for %s, not %s", httpjson.Echo(e.ID), e.Template, e.Requested)
}

// Template is a resolved template reference.
type Template struct {
	// ID is what the caller referred to ("" when the capability needs no template).
	ID       string
	MediaURL string
	// Official: an official Template (its media set by the service's administrators), not a
	// ShortTemplate (its media a URL of the account's).
	Official bool
	Terms    pricing.Terms
}

// Resolve finds the template ref for a task of capability c in namespace: an official
// Template's name or a ShortTemplate's ushort_ id, the ids the REST API documents. An empty ref
// is allowed only for video.eraser, which is priced at the default price.
func Resolve(ctx context.Context, r client.Reader, namespace string, c videogenv1alpha1.Capability, ref string) (Template, error) {
	return resolve(ctx, r, namespace, c, ref, false)
}

// ResolveWithObjectNames is Resolve that also takes the object name of a ShortTemplate of the
// namespace (ushort-…, as kubectl shows it), as kubectl users refer to objects; an official
// Template of the same name comes first. Only for tasks made with kubectl: a REST task was
// quoted by Resolve.
func ResolveWithObjectNames(ctx context.Context, r client.Reader, namespace string, c videogenv1alpha1.Capability, ref string) (Template, error) {
	return resolve(ctx, r, namespace, c, ref, true)
}

func resolve(ctx context.Context, r client.Reader, namespace string, c videogenv1alpha1.Capability, ref string, objectNames bool) (Template, error) {
	if ref == "" {
		if c == videogenv1alpha1.CapabilityEraser {
			return Template{}, nil
		}
		return Template{}, fmt.Errorf("%s needs a template: %w", c, ErrTemplateNotFound)
	}
	if strings.HasPrefix(ref, videogenv1alpha1.ShortTemplateIDPrefix) {
		return resolveShort(ctx, r, namespace, c, ref)
	}
	// A ref that cannot be an object name ('/', "..") names no template; asking the client
	// would fail with an invalid-name error instead.
	if len(validation.IsDNS1123Subdomain(ref)) > 0 {
		return Template{}, fmt.Errorf("%w: %q", ErrTemplateNotFound, ref)
	}
	var t videogenv1alpha1.Template
	if err := r.Get(ctx, client.ObjectKey{Name: ref}, &t); err != nil {
		if apierrors.IsNotFound(err) && objectNames {
			return resolveShortByName(ctx, r, namespace, c, ref)
		}
		if apierrors.IsNotFound(err) {
			return Template{}, fmt.Errorf("%w: %q", ErrTemplateNotFound, ref)
		}
		return Template{}, fmt.Errorf("reading template %q: %w", ref, err)
	}
	if t.Spec.Capability != c {
		return Template{}, &WrongCapabilityError{ID: ref, Template: t.Spec.Capability, Requested: c}
	}
	if !Usable(&t) {
		// Made before mediaURL was required (Ready=False, NoMedia): no task can render on it.
		return Template{}, fmt.Errorf("%w: %q has no media", ErrTemplateNotFound, ref)
	}
	return Template{ID: ref, MediaURL: t.Spec.MediaURL, Official: true, Terms: TermsOf(&t.Spec)}, nil
}

// Usable reports whether tasks can run on an official template: one whose capability needs
// media has it (the schema requires it now; a template made before may lack it).
func Usable(t *videogenv1alpha1.Template) bool {
	return !t.Spec.Capability.NeedsTemplateMedia() || t.Spec.MediaURL != ""
}

// TermsOf returns the pricing terms of an official template.
func TermsOf(s *videogenv1alpha1.TemplateSpec) pricing.Terms {
	terms := pricing.Terms{Price: s.Price, Adjustable: s.DurationAdjustable, DurationPrices: s.DurationPrices}
	if s.MinDuration != nil {
		terms.MinDuration = *s.MinDuration
	}
	if s.MaxDuration != nil {
		terms.MaxDuration = *s.MaxDuration
	}
	return terms
}

// FindShortTemplate returns the account's ShortTemplate with public id, or ErrTemplateNotFound.
// Another account's id is simply not found: ids never leak across namespaces.
func FindShortTemplate(ctx context.Context, r client.Reader, namespace, id string) (*videogenv1alpha1.ShortTemplate, error) {
	if len(validation.IsValidLabelValue(id)) > 0 {
		return nil, fmt.Errorf("%w: %q", ErrTemplateNotFound, id)
	}
	var list videogenv1alpha1.ShortTemplateList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{videogenv1alpha1.LabelShortTemplateID: id}); err != nil {
		return nil, fmt.Errorf("looking up template %q: %w", id, err)
	}
	// Two templates have the label for a moment when one was created with an id in use: the
	// ShortTemplate controller moves the newcomer away; the one that holds the id in status is it,
	// and before either does, the older, which the controller keeps it on.
	var found *videogenv1alpha1.ShortTemplate
	for i := range list.Items {
		st := &list.Items[i]
		if !st.DeletionTimestamp.IsZero() {
			continue
		}
		if st.Status.ID == id {
			return st, nil
		}
		if found == nil || OlderShortTemplate(st, found) {
			found = st
		}
	}
	if found != nil {
		return found, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrTemplateNotFound, id)
}

// OlderShortTemplate reports whether a was created before b (the UID breaks a tie): of two
// templates created with one id, the older keeps it.
func OlderShortTemplate(a, b *videogenv1alpha1.ShortTemplate) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}

// Custom short templates cost the system default price: the owner supplies the media, so
// there is no catalog price to apply.
func resolveShort(ctx context.Context, r client.Reader, namespace string, c videogenv1alpha1.Capability, id string) (Template, error) {
	// Found first: an id this account does not have (none at all, or another account's) is not
	// found for every capability, never "is for video.short", which says such a template exists.
	st, err := FindShortTemplate(ctx, r, namespace, id)
	if err != nil {
		return Template{}, err
	}
	if c != videogenv1alpha1.CapabilityShort {
		return Template{}, &WrongCapabilityError{ID: id, Template: videogenv1alpha1.CapabilityShort, Requested: c}
	}
	return Template{ID: id, MediaURL: st.Spec.TargetURL}, nil
}

// resolveShortByName finds the namespace's ShortTemplate whose object name is name.
func resolveShortByName(ctx context.Context, r client.Reader, namespace string, c videogenv1alpha1.Capability, name string) (Template, error) {
	var st videogenv1alpha1.ShortTemplate
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &st); err != nil {
		if apierrors.IsNotFound(err) {
			return Template{}, fmt.Errorf("%w: %q", ErrTemplateNotFound, name)
		}
		return Template{}, fmt.Errorf("reading short template %q: %w", name, err)
	}
	if !st.DeletionTimestamp.IsZero() {
		return Template{}, fmt.Errorf("%w: %q", ErrTemplateNotFound, name)
	}
	if c != videogenv1alpha1.CapabilityShort {
		return Template{}, &WrongCapabilityError{ID: name, Template: videogenv1alpha1.CapabilityShort, Requested: c}
	}
	return Template{ID: name, MediaURL: st.Spec.TargetURL}, nil
}
