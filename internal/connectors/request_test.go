package connectors_test

import (
	"net/http"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

func TestHeaderLookup(t *testing.T) {
	tests := []struct {
		name    string
		headers http.Header
		want    string
	}{
		{"canonical", http.Header{"Stripe-Signature": {"a"}}, "a"},
		{"lower-case key", http.Header{"stripe-signature": {"b"}}, "b"},
		{"upper-case key", http.Header{"STRIPE-SIGNATURE": {"c"}}, "c"},
		{"from map", connectors.HeadersFromMap(map[string]string{"stRipe-sIgnature": "d"}), "d"},
		{"first value", http.Header{"Stripe-Signature": {"e", "f"}}, "e"},
		{"absent", http.Header{"Other": {"x"}}, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &connectors.Request{Headers: tt.headers}
			if got := req.Header("Stripe-Signature"); got != tt.want {
				t.Fatalf("Header = %q, want %q", got, tt.want)
			}
			if got := req.Header("stripe-signature"); got != tt.want {
				t.Fatalf("Header(lower) = %q, want %q", got, tt.want)
			}
		})
	}
	var nilReq *connectors.Request
	if nilReq.Header("x") != "" {
		t.Fatal("nil request")
	}
}
