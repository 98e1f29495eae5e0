package eventservice

import (
	"errors"
	"mime"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// rpcRequests tells an RPC, answered in its protocol's error format, from a request that is
// none, answered with the apiserver's error envelope. The token check (TokenAuth) answers
// before answerNonRPC and connect-go look at a request, in the format they would answer it in.
type rpcRequests struct {
	procedures []string // the procedures' paths, sorted
	// contentTypes are the Content-Types connect-go serves on a procedure (its Accept-Post):
	// another one is an envelope 415, whatever protocol its prefix suggests.
	contentTypes map[string]bool
	errWriter    *connect.ErrorWriter
}

// newRPCRequests describes the RPCs of service, served by h.
func newRPCRequests(service protoreflect.ServiceDescriptor, h http.Handler) *rpcRequests {
	c := &rpcRequests{contentTypes: map[string]bool{}, errWriter: connect.NewErrorWriter()}
	for i := range service.Methods().Len() {
		c.procedures = append(c.procedures, "/"+string(service.FullName())+"/"+string(service.Methods().Get(i).Name()))
	}
	slices.Sort(c.procedures)
	// connect-go answers a Content-Type it does not serve with 415 and the list of those it
	// does, before it reads anything: ask it, rather than repeat its rules here.
	probe, err := http.NewRequest(http.MethodPost, c.procedures[0], http.NoBody)
	if err != nil {
		panic(err) // a constant method and a procedure path
	}
	probe.Header.Set("Content-Type", "application/x-no-rpc")
	w := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(w, probe)
	for _, ct := range strings.Split(w.header.Get("Accept-Post"), ",") {
		if ct = strings.TrimSpace(ct); ct != "" {
			c.contentTypes[canonicalContentType(ct)] = true
		}
	}
	return c
}

// isRPC reports whether r is answered in its protocol's error format: a POST to a procedure with
// a Content-Type connect-go serves there, or, to an unknown procedure, a request that declares
// its protocol (declaresRPC), which answerNonRPC answers with Unimplemented in that protocol.
func (c *rpcRequests) isRPC(r *http.Request) bool {
	if !slices.Contains(c.procedures, r.URL.Path) {
		return declaresRPC(r, c.errWriter)
	}
	return r.Method == http.MethodPost && c.contentTypes[canonicalContentType(r.Header.Get("Content-Type"))]
}

// canonicalContentType is a Content-Type as connect-go compares it: type and parameter names in
// lower case, and the charset's value.
func canonicalContentType(ct string) string {
	base, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	if charset, ok := params["charset"]; ok {
		params["charset"] = strings.ToLower(charset)
	}
	return mime.FormatMediaType(base, params)
}

// headerRecorder keeps the headers of an answer and drops the rest.
type headerRecorder struct{ header http.Header }

func (w *headerRecorder) Header() http.Header         { return w.header }
func (w *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerRecorder) WriteHeader(int)             {}

// answerNonRPC gives the requests connect-go would answer with a bare status (a text/plain 404
// for an unknown procedure, an empty 405 for another method, an empty 415 for a Content-Type
// no protocol serves) the apiserver's error envelope. RPCs go to next untouched and keep their
// protocol's error format.
func answerNonRPC(rpcs *rpcRequests, next http.Handler) http.Handler {
	served := "the service serves " + strings.Join(rpcs.procedures, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(rpcs.procedures, r.URL.Path) {
			msg := "no such procedure: " + httpjson.Echo(r.URL.Path) + "; " + served
			if declaresRPC(r, rpcs.errWriter) { // a gRPC or Connect client: Unimplemented, as its protocol says
				_ = rpcs.errWriter.Write(w, r, connect.NewError(connect.CodeUnimplemented, errors.New(msg)))
				return
			}
			httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, msg)
			return
		}
		next.ServeHTTP(&nonRPCWriter{ResponseWriter: w, r: r}, r)
	})
}

// declaresRPC says whether r names its RPC protocol: a gRPC or gRPC-Web Content-Type, or the
// Connect-Protocol-Version header every Connect client sends (curl's JSON does not).
func declaresRPC(r *http.Request, errWriter *connect.ErrorWriter) bool {
	if !errWriter.IsSupported(r) {
		return false
	}
	return r.Header.Get("Connect-Protocol-Version") != "" ||
		strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), "application/grpc")
}

// nonRPCWriter replaces the bare 405 and 415 connect-go answers before it reads a request (no
// Content-Type, no body: its RPC errors always have one, and are never 405 or 415) with the
// envelope, keeping its Allow and Accept-Post headers. Everything else passes through.
type nonRPCWriter struct {
	http.ResponseWriter
	r        *http.Request
	started  bool // a status or body went out (or was replaced)
	replaced bool // the envelope was written: drop what connect-go writes after
}

func (w *nonRPCWriter) WriteHeader(status int) {
	if w.replaced {
		return
	}
	if !w.started && w.Header().Get("Content-Type") == "" {
		switch status {
		case http.StatusMethodNotAllowed:
			w.started, w.replaced = true, true
			httpjson.WriteError(w.ResponseWriter, w.r, status, httpjson.CodeMethodNotAllowed,
				httpjson.Echo(w.r.Method)+" is not allowed on "+httpjson.Echo(w.r.URL.Path)+"; allowed: "+w.Header().Get("Allow"))
			return
		case http.StatusUnsupportedMediaType:
			w.started, w.replaced = true, true
			httpjson.WriteError(w.ResponseWriter, w.r, status, httpjson.CodeUnsupportedMedia, unsupportedMediaMessage(w.r))
			return
		}
	}
	w.started = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *nonRPCWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush lets connect-go flush through the wrapper (a no-op where the writer cannot).
func (w *nonRPCWriter) Flush() {
	if !w.replaced {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *nonRPCWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func unsupportedMediaMessage(r *http.Request) string {
	const want = "send application/json or application/proto (Connect), application/grpc (gRPC) " +
		"or application/grpc-web (gRPC-Web); Accept-Post lists every type"
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "no Content-Type: " + want
	}
	return "Content-Type " + httpjson.Echo(ct) + " is not an RPC protocol served here: " + want
}
