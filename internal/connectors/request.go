package connectors

import (
	"net/http"
	"net/url"
	"strings"
)

// Request is a webhook delivery exactly as it was received.
type Request struct {
	Method string
	// URI is the request URI as received; Square signs it when it is the
	// absolute notification URL.
	URI     string
	Headers http.Header
	// Body is the raw body. Signatures are computed over these bytes, so it
	// must never be re-serialized.
	Body  []byte
	Query url.Values
}

// Header returns the first value of the named header, matching the name
// case-insensitively even when Headers was filled with non-canonical keys
// (for example from gRPC metadata).
func (r *Request) Header(name string) string {
	if r == nil || r.Headers == nil {
		return ""
	}
	if v := r.Headers.Get(name); v != "" {
		return v
	}
	for key, values := range r.Headers {
		if strings.EqualFold(key, name) && len(values) > 0 && values[0] != "" {
			return values[0]
		}
	}
	return ""
}

// HeadersFromMap converts a plain map (as carried by an RPC request) into
// canonicalized http.Header.
func HeadersFromMap(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for key, value := range m {
		h.Add(key, value)
	}
	return h
}
