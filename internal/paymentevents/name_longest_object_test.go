package paymentevents_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/scheme"
)

// nameCheckingSink is an events.EventSink that hands every Event it is asked to create to
// created; the apiserver refuses a name that is not a DNS subdomain, so an invalid one is an
// Event lost.
type nameCheckingSink struct{ created chan *eventsv1.Event }

func (s nameCheckingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.created <- e.DeepCopy()
	return e, nil
}
func (s nameCheckingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}
func (s nameCheckingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return e, nil
}

// Checked, holds (the suspected loss does not happen with client-go v0.37): an Event about an
// object whose name is longer than ~236 characters is not lost.
//
// Suspicion: the recorder names an Event "<object name>.<hex UnixNano>" (17 more
// characters), so for a VideoTask or PaymentEvent of a name past 236 characters (kubectl
// allows 253; names from the ingress are at most 73, those from the REST API 27, but a
// PaymentEvent or VideoTask applied by hand may be as long as Kubernetes allows) the name
// passes 253 and the apiserver would refuse every Event about it: no PaymentReceived,
// DisputeCreated or SinkFailed for that object.
//
// What happens: every recorder of the manager (mgr.GetEventRecorder, the events.k8s.io
// broadcaster) names Events with client-go's util.GenerateEventName, which falls back to a
// random UUID when "<name>.<hex>" is not a DNS subdomain. This pins that, through the same
// broadcaster and recorder the manager builds, for the longest name an object can have: a
// client-go upgrade that dropped the fallback would lose those Events silently.
func TestEventAboutAnObjectWithTheLongestNameIsNotLost(t *testing.T) {
	sink := nameCheckingSink{created: make(chan *eventsv1.Event, 4)}
	broadcaster := events.NewBroadcaster(sink)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.New(), "paymentevent-controller")

	name := strings.Repeat("a", validation.DNS1123SubdomainMaxLength)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("test object name invalid: %v", errs)
	}
	pe := &videogenv1alpha1.PaymentEvent{
		TypeMeta:   metav1.TypeMeta{APIVersion: videogenv1alpha1.GroupVersion.String(), Kind: "PaymentEvent"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: name, UID: "uid-1"},
	}
	task := &videogenv1alpha1.VideoTask{
		TypeMeta:   metav1.TypeMeta{APIVersion: videogenv1alpha1.GroupVersion.String(), Kind: "VideoTask"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: "uid-2"},
	}
	recorder.Eventf(pe, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonSinkFailed, "Forward", "Not delivered to sink %s", "billing")
	recorder.Eventf(task, nil, corev1.EventTypeNormal, "Accepted", "Accept", "accepted")
	for range 2 {
		select {
		case e := <-sink.created:
			if errs := validation.IsDNS1123Subdomain(e.Name); len(errs) > 0 {
				t.Errorf("the Event about %s %q… is named %q: the apiserver refuses it (%v)", e.Regarding.Kind, name[:8], e.Name, errs)
			}
			if e.Regarding.Name != name {
				t.Errorf("the Event regards %q, want the object", e.Regarding.Name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no Event reached the sink")
		}
	}
}
