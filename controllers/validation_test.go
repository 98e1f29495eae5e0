package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/testenv/envsuite"
)

// The CRDs' schema and CEL rules refuse bad objects at the apiserver, before any controller.
var _ = Describe("API validation", func() {
	ns := "default"
	// Templates below have media, so that each is refused for the one reason its entry names.
	media := "https://media.example/template.mp4"

	DescribeTable("refuses invalid Templates",
		func(spec videogenv1alpha1.TemplateSpec, message string) {
			t := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: envsuite.Unique("bad")}, Spec: spec}
			err := k8sClient.Create(ctx, t)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("min above max", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](20), MaxDuration: ptr.To[int32](10)}, "minDuration must not exceed maxDuration"),
		Entry("adjustable without bounds", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true}, "minDuration and maxDuration are required"),
		Entry("duration prices on a fixed template", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media,
			DurationPrices: map[string]int64{"5": 1}}, "only allowed when durationAdjustable"),
		Entry("a duration key that is not seconds", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](1), MaxDuration: ptr.To[int32](9), DurationPrices: map[string]int64{"5s": 1}}, "whole seconds"),
		Entry("an unknown capability", videogenv1alpha1.TemplateSpec{Capability: "video.unknown", DisplayName: "x"}, "Unsupported value"),
		Entry("a negative price", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media, Price: ptr.To[int64](-1)}, "spec.price"),
		Entry("a right-to-left override in the name", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "invoice\u202Egpj.exe", MediaURL: media}, "spec.displayName"),
		Entry("a line separator in the name", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "a\u2028b", MediaURL: media}, "spec.displayName"),
		Entry("a name of spaces", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "   ", MediaURL: media}, "displayName must not be blank"),
		Entry("a duration price outside [min, max]", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](5), MaxDuration: ptr.To[int32](10), DurationPrices: map[string]int64{"5": 1, "30": 2}},
			"keys must lie within [minDuration, maxDuration]"),
		Entry("a flat price on an adjustable template", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			Price: ptr.To[int64](50), DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10)},
			"price is for fixed-duration templates"),
		Entry("a video.short template without media", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x"},
			"mediaURL is required for video.short, video.template and image.pose templates"),
		Entry("a video.template template without media", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x",
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10)}, "mediaURL is required"),
		Entry("an image.pose template without media", videogenv1alpha1.TemplateSpec{Capability: "image.pose", DisplayName: "x"},
			"mediaURL is required"),
		Entry("a price above what a top-up can credit", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media,
			Price: ptr.To[int64](9223372036854775807)}, "price must not exceed 1000000000 points"),
		Entry("a price just above the cap", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media,
			Price: ptr.To(videogenv1alpha1.MaxPoints + 1)}, "price must not exceed 1000000000 points"),
		Entry("a duration price above what a top-up can credit", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10), DurationPrices: map[string]int64{"5": videogenv1alpha1.MaxPoints + 1}},
			"prices must not exceed 1000000000 points"),
		Entry("an adjustable video.short template", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10)}, "durationAdjustable is only for video.template templates"),
		Entry("an adjustable video.eraser template", videogenv1alpha1.TemplateSpec{Capability: "video.eraser", DisplayName: "x",
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10)}, "durationAdjustable is only for video.template templates"),
		Entry("an adjustable image.pose template", videogenv1alpha1.TemplateSpec{Capability: "image.pose", DisplayName: "x", MediaURL: media,
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10)}, "durationAdjustable is only for video.template templates"),
		Entry("minDuration on a fixed template", videogenv1alpha1.TemplateSpec{Capability: "video.template", DisplayName: "x", MediaURL: media,
			MinDuration: ptr.To[int32](2)}, "minDuration and maxDuration are only allowed when durationAdjustable is true"),
		Entry("maxDuration on a fixed template", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media,
			MaxDuration: ptr.To[int32](10)}, "minDuration and maxDuration are only allowed when durationAdjustable is true"),
		Entry("a line break in the media's URL", videogenv1alpha1.TemplateSpec{Capability: "video.short", DisplayName: "x", MediaURL: media + "\n"}, "spec.mediaURL"),
	)

	It("accepts prices of exactly the most a top-up can credit", func() {
		fixed := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: envsuite.Unique("dear")},
			Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Dear", MediaURL: media,
				Price: ptr.To(videogenv1alpha1.MaxPoints)}}
		adjustable := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: envsuite.Unique("dear")},
			Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate, DisplayName: "Dear", MediaURL: media,
				DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10),
				DurationPrices: map[string]int64{"5": videogenv1alpha1.MaxPoints}}}
		for _, t := range []*videogenv1alpha1.Template{fixed, adjustable} {
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			DeferCleanup(func() { Expect(k8sClient.Delete(ctx, t)).To(Succeed()) })
		}
	})

	It("accepts a video.eraser Template without media: it works on the caller's video", func() {
		t := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: envsuite.Unique("eraser")},
			Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityEraser, DisplayName: "Eraser"}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, t)).To(Succeed()) })
	})

	DescribeTable("refuses ShortTemplate names that hide or break text",
		func(name, message string) {
			st := &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("bad")},
				Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: name, TargetURL: "https://media.example/t.mp4"}}
			err := k8sClient.Create(ctx, st)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a zero-width space", "a\u200Bb", "spec.displayName"),
		Entry("a paragraph separator", "a\u2029b", "spec.displayName"),
		Entry("spaces only", " \u3000 ", "displayName must not be blank"),
	)

	It("allows one PointAccount per namespace, named default", func() {
		a := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}}
		err := k8sClient.Create(ctx, a)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("must be named 'default'"))
	})

	It("keeps a VideoTask's spec immutable", func() {
		task := aShortTask(ns, "some-template").Create()
		task.Spec.TemplateRef = "another-template"
		err := k8sClient.Update(ctx, task)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})

	DescribeTable("refuses VideoTasks missing what their capability needs",
		func(spec videogenv1alpha1.VideoTaskSpec, message string) {
			t := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("bad")}, Spec: spec}
			err := k8sClient.Create(ctx, t)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("short without a face", videogenv1alpha1.VideoTaskSpec{Capability: "video.short", TemplateRef: "t"}, "inputs.faceImageURL"),
		Entry("eraser without a video", videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser"}, "inputs.sourceVideoURL"),
		Entry("template without a duration", videogenv1alpha1.VideoTaskSpec{Capability: "video.template", TemplateRef: "t"}, "needs templateRef and duration"),
		Entry("a zero timeout", videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser", Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/v.mp4"},
			Timeout: &metav1.Duration{}}, "timeout must be a positive duration"),
		Entry("a negative timeout", videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser", Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/v.mp4"},
			Timeout: &metav1.Duration{Duration: -time.Minute}}, "timeout must be a positive duration"),
		Entry("a face that is not a URL", videogenv1alpha1.VideoTaskSpec{Capability: "video.short", TemplateRef: "t",
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "file:///etc/passwd"}}, "spec.inputs.faceImageURL"),
		Entry("a negative duration", videogenv1alpha1.VideoTaskSpec{Capability: "video.template", TemplateRef: "t", Duration: ptr.To[int32](-5)}, "spec.duration"),
		// The REST API refuses control characters in URLs (Go's URL parser does); kubectl met
		// only ^https?://, and such a task was frozen, then failed when fetched.
		Entry("a line break in the video's URL", videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser",
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/v.mp4\r\nX-Injected: 1"}}, "spec.inputs.sourceVideoURL"),
		Entry("a NUL in the face's URL", videogenv1alpha1.VideoTaskSpec{Capability: "video.short", TemplateRef: "t",
			Inputs: videogenv1alpha1.TaskInputs{FaceImageURL: "https://media.example/f.jpg\x00.png"}}, "spec.inputs.faceImageURL"),
		Entry("a DEL in the webhook's URL", videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser",
			Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/v.mp4"}, WebhookURL: "https://hooks.example/\x7f"}, "spec.webhookURL"),
	)

	It("takes URLs with spaces and characters beyond ASCII, as the REST API does", func() {
		t := &videogenv1alpha1.VideoTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("url")},
			Spec: videogenv1alpha1.VideoTaskSpec{Capability: "video.eraser",
				Inputs: videogenv1alpha1.TaskInputs{SourceVideoURL: "https://media.example/été 2026.mp4"}}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Expect(k8sClient.Delete(ctx, t)).To(Succeed())
	})

	It("says what a timeout that is no duration should be", func() {
		// Past Go's durations (3000000h, 20 digits of ns) too: duration() would fail in the
		// conversion, with a message naming CEL types.
		for _, timeout := range []string{"banana", "10", "-5m", "1h 30m", "721h", "3000000h", "99999999999999999999ns", "999999h999999h999999h"} {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": videogenv1alpha1.GroupVersion.String(), "kind": "VideoTask",
				"metadata": map[string]any{"namespace": ns, "name": envsuite.Unique("bad")},
				"spec": map[string]any{"capability": "video.eraser", "inputs": map[string]any{"sourceVideoURL": "https://media.example/v.mp4"},
					"timeout": timeout},
			}}
			err := k8sClient.Create(ctx, u)
			Expect(err).To(HaveOccurred(), "timeout %q", timeout)
			Expect(err.Error()).To(ContainSubstring("timeout must be a positive duration"), "timeout %q", timeout)
			Expect(err.Error()).NotTo(ContainSubstring("type conversion error"), "timeout %q", timeout)
		}
	})

	It("takes a timeout of up to 720h in any unit", func() {
		for _, timeout := range []string{"720h", "2592000s", "43200m", "1h30m", "1.5h", "500ms"} {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": videogenv1alpha1.GroupVersion.String(), "kind": "VideoTask",
				"metadata": map[string]any{"namespace": ns, "name": envsuite.Unique("ok")},
				"spec": map[string]any{"capability": "video.eraser", "inputs": map[string]any{"sourceVideoURL": "https://media.example/v.mp4"},
					"timeout": timeout},
			}}
			Expect(k8sClient.Create(ctx, u, client.DryRunAll)).To(Succeed(), "timeout %q", timeout)
		}
	})

	It("keeps a PointTopUp immutable and its amount positive", func() {
		bad := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("bad")},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 0, Reference: "INV"}}
		Expect(k8sClient.Create(ctx, bad)).NotTo(Succeed())
		noRef := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("bad")},
			Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5}}
		Expect(k8sClient.Create(ctx, noRef)).NotTo(Succeed())
		err := k8sClient.Create(ctx, bad)
		Expect(err.Error()).To(ContainSubstring("amount must not be 0"))
		Expect(err.Error()).NotTo(ContainSubstring("needs a note"), "a zero amount is no debit")
		// A reference with a space at either end would pass for another than the one it shows.
		for _, ref := range []string{"INV-1 ", " INV-1", "  ", "INV-1\n"} {
			spaced := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: envsuite.Unique("bad")},
				Spec: videogenv1alpha1.PointTopUpSpec{Amount: 5, Reference: ref}}
			err := k8sClient.Create(ctx, spaced)
			Expect(err).To(HaveOccurred(), "reference %q", ref)
			Expect(err.Error()).To(ContainSubstring("spec.reference"), "reference %q", ref)
		}

		ok := suite.TopUp(ns, envsuite.Unique("ok"), 5)
		ok.Spec.Amount = 5000
		err = k8sClient.Update(ctx, ok)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("immutable"))
	})
})
