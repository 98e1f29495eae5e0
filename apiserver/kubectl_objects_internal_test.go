package apiserver

// Objects made with kubectl, as the REST API shows them.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
)

// What breaks: the REST API lists an account's ShortTemplates under the value of their id label
// (videogen.dev/short-template-id), whatever it is. One made with kubectl may carry any label
// value: the ShortTemplate controller keeps it but marks the template Ready=False, reason
// InvalidID ("label … must start with ushort_"), and a task's template_id resolves only ushort_
// ids to short templates. So GET /v1/short-templates and GET /v1/templates?capability=video.short
// offer {"id":"promo-2026","custom":true,"price":<default>} for a template no task can use:
// POST /v1/videos with that template_id is 400 "no template … is available", or, when the value
// is an official Template's name, the task runs on that official template at its price, not at
// the default price the listing showed for the "custom" entry.
//
// Input: kubectl apply of a ShortTemplate labelled videogen.dev/short-template-id=<value>, in the
// account's namespace; then the account's REST client lists its templates. Nothing races.
func TestAKubectlShortTemplateWithAnIDThatIsNoneIsNotListedAsUsable(t *testing.T) {
	const acct = "acct-19"
	official := &videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: "studio-pro"},
		Spec: videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort, DisplayName: "Studio",
			MediaURL: "https://cdn.example/studio.mp4", Price: new(int64)}}
	*official.Spec.Price = 500
	short := func(name, label string) *videogenv1alpha1.ShortTemplate {
		return &videogenv1alpha1.ShortTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: acct, Name: name,
			Labels: map[string]string{videogenv1alpha1.LabelShortTemplateID: label}},
			Spec: videogenv1alpha1.ShortTemplateSpec{DisplayName: name, TargetURL: "https://cdn.example/" + name + ".mp4"}}
	}
	s, c := refusingServer(t, nil, official, short("promo", "promo-2026"), short("lookalike", "studio-pro"), short("fine", "ushort_fine"))
	s.cfg.DefaultPrice = 10

	for _, tc := range []struct {
		path      string
		allCustom bool // every entry is the account's own (the short-templates listing has no "custom")
		list      func(http.ResponseWriter, *http.Request)
	}{
		{"/v1/short-templates", true, func(w http.ResponseWriter, r *http.Request) {
			s.listShortTemplates(w, r, apikeys.Principal{Account: acct, KeyID: "k"})
		}},
		{"/v1/templates?capability=video.short", false, func(w http.ResponseWriter, r *http.Request) {
			s.listTemplates(w, r, apikeys.Principal{Account: acct, KeyID: "k"})
		}},
	} {
		rec := httptest.NewRecorder()
		tc.list(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", tc.path, rec.Code, rec.Body)
		}
		var page struct {
			Data []struct {
				ID     string `json:"id"`
				Custom bool   `json:"custom"`
				Price  int64  `json:"price"`
			} `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		sawFine := false
		for _, v := range page.Data {
			if v.ID == "ushort_fine" {
				sawFine = true
			}
			if v.ID == "ushort_fine" || (v.ID == "studio-pro" && !v.Custom && !tc.allCustom) {
				continue
			}
			// What a task with this template_id would run on, and at what price.
			tmpl, err := catalog.Resolve(context.Background(), c, acct, videogenv1alpha1.CapabilityShort, v.ID)
			switch {
			case err != nil:
				t.Errorf("GET %s lists template id %q, which a task's template_id cannot use: %v", tc.path, v.ID, err)
			case tmpl.MediaURL == official.Spec.MediaURL:
				t.Errorf("GET %s lists the account's own template %q, but a task with that template_id runs on the official %q at %d points",
					tc.path, v.ID, official.Name, *official.Spec.Price)
			}
		}
		if !sawFine {
			t.Errorf("GET %s does not list the usable ushort_fine: %s", tc.path, rec.Body)
		}
	}
	for _, id := range []string{"promo-2026", "studio-pro"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/short-templates/"+id, nil)
		req.SetPathValue("id", id)
		rec := serveAs(s.getShortTemplate, acct, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET /v1/short-templates/%s: %d %s, want 404: no task can use that id", id, rec.Code, rec.Body)
		}
	}
}
