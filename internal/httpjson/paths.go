package httpjson

import (
	"net/http"
	"path"
	"strings"
)

// RefuseUncleanPaths answers 404 for a path with "." or ".." segments or a doubled slash. The
// mux would redirect it to the cleaned path with an HTML body; no resource has such a path,
// and a client that sent one is confused or probing. A CONNECT in authority form
// ("CONNECT host:port", a proxy's request) has no path at all, which no route of the mux (not
// even "/") matches: it is answered 404 here too, not with the mux's plain-text one.
func RefuseUncleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if r.Method == http.MethodConnect && !strings.HasPrefix(p, "/") {
			WriteError(w, r, http.StatusNotFound, CodeNotFound,
				"no such endpoint: "+Echo(r.Method+" "+r.Host)+" (this server is no proxy)")
			return
		}
		if p != cleanPath(p) {
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
