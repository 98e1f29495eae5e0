package eventservice

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// answerNonRPC gives the requests connect-go would answer with a bare status (a text/plain 404
// for an unknown procedure, an empty 405 for another method, an empty 415 for a Content-Type
// no protocol serves) the apiserver's error envelope. RPCs go to next untouched and keep their
// protocol's error format.
func answerNonRPC(service protoreflect.ServiceDescriptor, next http.Handler) http.Handler {
	procedures := make([]string, 0, service.Methods().Len())
	for i := range service.Methods().Len() {
		procedures = append(procedures, "/"+string(service.FullName())+"/"+string(service.Methods().Get(i).Name()))
	}
	slices.Sort(procedures)
	served := "the service serves " + strings.Join(procedures, ", ")
	errWriter := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(procedures, r.URL.Path) {
			msg := "no such procedure: " + httpjson.Echo(r.URL.Path) + "; " + served
			if declaresRPC(r, errWriter) { // a gRPC or Connect client: Unimplemented, as its protocol says
				_ = errWriter.Write(w, r, connect.NewError(connect.CodeUnimplemented, errors.New(msg)))
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
