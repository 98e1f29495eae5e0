// Package openapi holds the OpenAPI 3.1 document of the /v1 API and serves it.
package openapi

import (
	_ "embed"
	"net/http"
)

// Document is openapi.json.
//
//go:embed openapi.json
var Document []byte

// Handler serves the document.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(Document)
	})
}
