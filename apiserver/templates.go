package apiserver

import (
	"net/http"
	"sort"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// TemplateView is a template as the catalog shows it. Price is the flat price (or the default
// price); adjustable templates list their duration prices, with durations as string keys, and
// the default price that a duration in range without an entry costs.
type TemplateView struct {
	ID                 string           `json:"id"`
	Object             string           `json:"object"`
	Capability         string           `json:"capability"`
	Name               string           `json:"name"`
	Price              int64            `json:"price"`
	CoverURL           *string          `json:"cover_url"`
	DurationAdjustable bool             `json:"duration_adjustable"`
	MinDuration        *int32           `json:"min_duration"`
	MaxDuration        *int32           `json:"max_duration"`
	DurationPrices     map[string]int64 `json:"duration_prices"`
	DefaultPrice       *int64           `json:"default_price"`
	Custom             bool             `json:"custom"`
}

// templateList is the template listing, with the system default price: what a task without a
// template (video.eraser) costs, which no template in the list could say.
type templateList struct {
	list[TemplateView]
	DefaultPrice int64 `json:"default_price"`
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	q, err := queryParams(r, "capability")
	if writeRequestError(w, r, err) {
		return
	}
	capability := videogenv1alpha1.Capability(q.Get("capability"))
	if capability != "" && !capability.Valid() {
		httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest,
			"query parameter \"capability\": unknown capability "+httpjson.Echo(string(capability))+
				"; use one of video.short, video.eraser, video.template, image.pose")
		return
	}
	var official videogenv1alpha1.TemplateList
	if err := s.cfg.Client.List(r.Context(), &official); err != nil {
		s.internalError(w, r, err)
		return
	}
	out := templateList{list: list[TemplateView]{Object: "list", Data: []TemplateView{}}, DefaultPrice: s.cfg.DefaultPrice}
	for i := range official.Items {
		t := &official.Items[i]
		if (capability != "" && t.Spec.Capability != capability) || !catalog.Usable(t) {
			continue // another capability, or no template a task can run on
		}
		if t.Spec.Capability == videogenv1alpha1.CapabilityEraser {
			// POST /v1/videos/eraser names no template and costs default_price: a video.eraser
			// Template prices kubectl tasks only, and listed here it would offer a price no
			// request can get.
			continue
		}
		out.Data = append(out.Data, s.viewTemplate(t))
	}
	sort.Slice(out.Data, func(i, j int) bool { return out.Data[i].ID < out.Data[j].ID })
	if capability == "" || capability == videogenv1alpha1.CapabilityShort {
		var own videogenv1alpha1.ShortTemplateList
		if err := s.accountReader(p).List(r.Context(), &own, client.InNamespace(p.Account)); err != nil {
			s.internalError(w, r, err)
			return
		}
		for _, st := range sortedShortTemplates(own.Items) {
			// Being deleted, it is gone: template_id no longer resolves it (nor does
			// GET /v1/short-templates list it), though a finalizer may keep it for a while.
			if id := shortTemplateID(&st); id != "" && st.DeletionTimestamp.IsZero() {
				out.Data = append(out.Data, TemplateView{ID: id, Object: "template", Capability: string(videogenv1alpha1.CapabilityShort),
					Name: st.Spec.DisplayName, Price: s.cfg.DefaultPrice, CoverURL: optString(st.Spec.CoverURL),
					DurationPrices: map[string]int64{}, Custom: true})
			}
		}
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) viewTemplate(t *videogenv1alpha1.Template) TemplateView {
	v := TemplateView{
		ID: t.Name, Object: "template", Capability: string(t.Spec.Capability), Name: t.Spec.DisplayName,
		Price: s.cfg.DefaultPrice, CoverURL: optString(t.Spec.CoverURL), DurationAdjustable: t.Spec.DurationAdjustable,
		DurationPrices: map[string]int64{},
	}
	if t.Spec.Price != nil {
		v.Price = *t.Spec.Price
	}
	if t.Spec.DurationAdjustable {
		// Without it a client could not know, before submitting, what an unlisted duration costs.
		v.DefaultPrice = ptr.To(s.cfg.DefaultPrice)
		v.MinDuration, v.MaxDuration = t.Spec.MinDuration, t.Spec.MaxDuration
		for k, p := range t.Spec.DurationPrices {
			v.DurationPrices[k] = p
		}
	}
	return v
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
