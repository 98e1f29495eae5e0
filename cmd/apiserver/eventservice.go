package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice"
)

// mountEventService serves EventService.Handle (gRPC, gRPC-Web and Connect) beside the REST API,
// for callers presenting one of the tokens listed in tokensFile (mount it from a Secret).
func mountEventService(mux *http.ServeMux, svc *eventservice.Service, tokensFile string) error {
	raw, err := os.ReadFile(tokensFile)
	if err != nil {
		return fmt.Errorf("--event-service-tokens-file: %w", err)
	}
	var tokens []string
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			tokens = append(tokens, t)
		}
	}
	auth, err := eventservice.NewTokenAuth(tokens...)
	if err != nil {
		return err
	}
	path, handler, err := eventservice.NewHandler(svc, auth)
	if err != nil {
		return err
	}
	mux.Handle(path, handler)
	return nil
}
