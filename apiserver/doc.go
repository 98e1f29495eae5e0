// Package apiserver is the /v1 REST API: a stateless sidecar that authenticates callers by API
// key, turns requests into videogen.dev custom resources and reads them back. Every replica is
// the same; all state lives in the cluster, so any number can run behind one Service.
//
// See docs/api.md for the API and apiserver/openapi/openapi.json for its OpenAPI 3.1 document.
package apiserver
