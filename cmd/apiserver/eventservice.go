package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// tokensReloadInterval is how often the service tokens file is looked at for changes.
const tokensReloadInterval = 5 * time.Second

// mountEventService serves EventService.Handle (gRPC, gRPC-Web and Connect) beside the REST API,
// for callers presenting one of the tokens listed in tokensFile (mount it from a Secret); the
// file is followed, so tokens are added and revoked without a restart.
func mountEventService(mux *http.ServeMux, svc *eventservice.Service, tokensFile string, log *slog.Logger) error {
	auth, err := eventservice.TokenFileAuth(tokensFile, tokensReloadInterval, log)
	if err != nil {
		return fmt.Errorf("--event-service-tokens-file: %w", err)
	}
	path, handler, err := eventservice.NewHandler(svc, auth)
	if err != nil {
		return err
	}
	mux.Handle(path, handler)
	// The bare service name too: the mux would answer it with a redirect to path, where it is no
	// procedure either. The handler answers it 404 in the error envelope, after the token check.
	mux.Handle(strings.TrimSuffix(path, "/"), handler)
	return nil
}
