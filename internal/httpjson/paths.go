package httpjson

import (
	"net/http"
	"path"
)

// RefuseUncleanPaths answers 404 for a path with "." or ".." segments or a doubled slash. The
// mux would redirect it to the cleaned path with an HTML body; no resource has such a path,
// and a client that sent one is confused or probing.
func RefuseUncleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
			WriteError(w, r, http.StatusNotFound, CodeNotFound,
				"no such endpoint: "+Echo(r.Method+" "+r.URL.Path)+" (paths have no . or .. segments and no //)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is the path the mux routes p as (net/http's cleanPath).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if p[len(p)-1] == '/' && clean != "/" {
		clean += "/"
	}
	return clean
}
