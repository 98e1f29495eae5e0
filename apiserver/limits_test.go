package apiserver_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver"
	"github.com/videogen-dev/videogen-operator/internal/testenv"
)

var _ = Describe("Field limits", func() {
	It("are the maxLength of the CRD field each value is stored in", func() {
		root, err := testenv.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		Expect(apiserver.FieldLimits).NotTo(BeEmpty())
		for _, l := range apiserver.FieldLimits {
			raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "videogen.dev_"+l.Resource+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			var crd apiextensionsv1.CustomResourceDefinition
			Expect(yaml.Unmarshal(raw, &crd)).To(Succeed())
			schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
			for _, part := range strings.Split(l.Path, ".") {
				next, ok := schema.Properties[part]
				Expect(ok).To(BeTrue(), "%s has no field %s", l.Resource, l.Path)
				schema = &next
			}
			Expect(schema.MaxLength).NotTo(BeNil(), "%s %s has no maxLength", l.Resource, l.Path)
			Expect(*schema.MaxLength).To(BeEquivalentTo(l.Max), "request field %q and %s %s", l.Field, l.Resource, l.Path)
		}
	})

	It("accepts every field at exactly its limit", func() {
		a := newAccount(100)
		// A template name of 253 characters: labels of at most 63, dot-separated.
		long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
		Expect(long).To(HaveLen(253))
		t := &videogenv1alpha1.Template{ObjectMeta: objectMeta(long)}
		t.Spec = videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate, DisplayName: strings.Repeat("é", 128),
			MediaURL: "https://cdn.example.com/m.mp4", DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](2),
			DurationPrices: map[string]int64{"2": 5}}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, t)).To(Succeed()) })

		video := api.post("/v1/videos/template", a.key, map[string]any{"template_id": long, "duration": 2, "webhook_url": longURL(2048)})
		Expect(video.Status).To(Equal(http.StatusAccepted), truncated(video.Body))
		Expect(video.JSON()["webhook_url"]).To(Equal(longURL(2048)))
		eraser := api.post("/v1/videos/eraser", a.key, map[string]any{"video": longURL(2048)})
		Expect(eraser.Status).To(Equal(http.StatusAccepted), truncated(eraser.Body))

		st := api.post("/v1/short-templates", a.key, map[string]any{"name": strings.Repeat("é", 128),
			"target_url": longURL(2048), "cover_url": longURL(2048)})
		Expect(st.Status).To(Equal(http.StatusCreated), truncated(st.Body))
		Expect(st.JSON()["name"]).To(Equal(strings.Repeat("é", 128)))
		short := api.post("/v1/videos/short", a.key, map[string]any{"template_id": st.JSON()["id"], "face": longURL(2048)})
		Expect(short.Status).To(Equal(http.StatusAccepted), truncated(short.Body))
		expectCharged(a.ns, 100-5-10-10, 25)
	})
})
